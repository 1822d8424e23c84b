/* test_devmem.c -- the device memory probe (rsd_devmem_*) against a fake NVML library
   (tests/fake_nvml.c, built by the Makefile as build/tests/libfake_nvml.so; another
   path through $RSD_FAKE_NVML), a fake sysfs root and a fake procfs root written into a
   temporary directory, hostile contents included (huge numbers, garbage, missing and
   oversized files), and the meminfo and sysfs number parsers on their own. The NVML
   cases skip with one line where the fake library is not there (cross builds: a static
   foreign binary cannot load the host's library). */
#if !defined(_WIN32) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* setenv, mkdtemp, getcwd */
#endif
#include "../residency_http.h"
#include "rsd_test.h"
#include "portable.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GiB (1024ull * 1024 * 1024)
#define MiB (1024ull * 1024)

static char g_root[300];

/* Writes root/rel (the directories on the way made) with n bytes of text. */
static int put(const char *rel, const char *text, size_t n) {
    char path[600], *s;
    FILE *f;
    snprintf(path, sizeof path, "%s/%s", g_root, rel);
    for (s = path + strlen(g_root) + 1; (s = strchr(s, '/')) != NULL; s++) {
        *s = 0;
        tp_mkdir(path);
        *s = '/';
    }
    if (!(f = fopen(path, "wb"))) return -1;
    if (n && fwrite(text, 1, n, f) != n) n = (size_t)-1;
    fclose(f);
    return n == (size_t)-1 ? -1 : 0;
}
static int puts_(const char *rel, const char *text) { return put(rel, text, strlen(text)); }

static int new_root(const char *name) {
    if (g_root[0]) tp_remove_tree(g_root);
    return tp_temp_dir(name, g_root, sizeof g_root);
}

static rsd_devmem *probe(const char *nvml, const char *sys, const char *proc) {
    rsd_devmem_desc d;
    char s[600], p[600];
    memset(&d, 0, sizeof d);
    d.nvml_path = nvml;
    d.ignore_env = true;
    snprintf(s, sizeof s, "%s/%s", g_root, sys);
    snprintf(p, sizeof p, "%s/%s", g_root, proc);
    d.sys_root = s;
    d.proc_root = p;
    return rsd_devmem_create(&d);
}

static const rsd_devmem_dev *find(const rsd_devmem_dev *d, int n, const char *name) {
    int i;
    for (i = 0; i < n; i++)
        if (!strcmp(d[i].name, name)) return &d[i];
    return NULL;
}

static const char *fake_nvml(void) {
    static char path[700];
    const char *e = getenv("RSD_FAKE_NVML"), *rel = e ? e : "build/tests/libfake_nvml.so";
    char cwd[300];
    FILE *f;
    if (getenv("RSD_TEST_QEMU") || strlen(rel) >= 300) return NULL;
    if (!(f = fopen(rel, "rb"))) return NULL;
    fclose(f);
    if (rel[0] == '/') snprintf(path, sizeof path, "%s", rel);
    else if (getcwd(cwd, sizeof cwd)) snprintf(path, sizeof path, "%s/%s", cwd, rel); /* dlopen: a path */
    else return NULL;
    return path;
}

static const char k_meminfo[] =
    "MemTotal:       65536000 kB\n"
    "MemFree:         1000000 kB\n"
    "MemAvailable:   40000000 kB\n"
    "Buffers:          123456 kB\n"
    "HugePages_Total:       0\n";

static void test_parse_u64(void) {
    uint64_t v;
    CHECK_EQ_INT(rsd_devmem_parse_u64("25753026560\n", 12, &v), RSD_OK);
    CHECK(v == 25753026560ull);
    CHECK_EQ_INT(rsd_devmem_parse_u64("0", 1, &v), RSD_OK);
    CHECK(v == 0);
    CHECK_EQ_INT(rsd_devmem_parse_u64("18446744073709551615 \r\n", 23, &v), RSD_OK);
    CHECK(v == UINT64_MAX);
    CHECK_EQ_INT(rsd_devmem_parse_u64("18446744073709551616", 20, &v), RSD_ERR_OVERFLOW);
    CHECK(v == 0);
    CHECK_EQ_INT(rsd_devmem_parse_u64("99999999999999999999999999999", 29, &v), RSD_ERR_OVERFLOW);
    CHECK_EQ_INT(rsd_devmem_parse_u64("", 0, &v), RSD_ERR_PAYLOAD);
    CHECK_EQ_INT(rsd_devmem_parse_u64("\n", 1, &v), RSD_ERR_PAYLOAD);
    CHECK_EQ_INT(rsd_devmem_parse_u64("-1", 2, &v), RSD_ERR_PAYLOAD);
    CHECK_EQ_INT(rsd_devmem_parse_u64(" 12", 3, &v), RSD_ERR_PAYLOAD);
    CHECK_EQ_INT(rsd_devmem_parse_u64("12 kB", 5, &v), RSD_ERR_PAYLOAD);
    CHECK_EQ_INT(rsd_devmem_parse_u64("12\0003", 4, &v), RSD_ERR_PAYLOAD);
    CHECK_EQ_INT(rsd_devmem_parse_u64("0x10", 4, &v), RSD_ERR_PAYLOAD);
    CHECK_EQ_INT(rsd_devmem_parse_u64("12", 1, &v), RSD_OK); /* only len bytes are read */
    CHECK(v == 1);
    CHECK_EQ_INT(rsd_devmem_parse_u64(NULL, 0, &v), RSD_ERR_PAYLOAD);
    CHECK_EQ_INT(rsd_devmem_parse_u64(NULL, 3, &v), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_devmem_parse_u64("1", 1, NULL), RSD_ERR_ARG);
}

static void test_parse_meminfo(void) {
    uint64_t v;
    size_t n = sizeof k_meminfo - 1;
    CHECK_EQ_INT(rsd_devmem_parse_meminfo(k_meminfo, n, "MemTotal", &v), RSD_OK);
    CHECK(v == 65536000ull * 1024);
    CHECK_EQ_INT(rsd_devmem_parse_meminfo(k_meminfo, n, "MemAvailable", &v), RSD_OK);
    CHECK(v == 40000000ull * 1024);
    CHECK_EQ_INT(rsd_devmem_parse_meminfo(k_meminfo, n, "HugePages_Total", &v), RSD_OK); /* no unit */
    CHECK(v == 0);
    CHECK_EQ_INT(rsd_devmem_parse_meminfo(k_meminfo, n, "Mem", &v), RSD_ERR_NOT_FOUND); /* whole keys */
    CHECK_EQ_INT(rsd_devmem_parse_meminfo(k_meminfo, n, "Cached", &v), RSD_ERR_NOT_FOUND);
    CHECK_EQ_INT(rsd_devmem_parse_meminfo(k_meminfo, 20, "MemFree", &v), RSD_ERR_NOT_FOUND); /* cut */
    {   /* the last line without its newline, and a cut in the middle of a number */
        const char *t = "A: 1 kB\nMemTotal: 77 kB";
        CHECK_EQ_INT(rsd_devmem_parse_meminfo(t, strlen(t), "MemTotal", &v), RSD_OK);
        CHECK(v == 77 * 1024);
        CHECK_EQ_INT(rsd_devmem_parse_meminfo(t, strlen(t) - 4, "MemTotal", &v), RSD_OK);
        CHECK(v == 7);
    }
    {   /* hostile: a number that overflows once scaled, garbage, a sign, a unit alone */
        const char *big = "MemTotal: 18014398509481984 kB\n"; /* 2^54 kB = 2^64 bytes */
        const char *edge = "MemTotal: 18014398509481983 kB\n";
        const char *huge = "MemTotal: 999999999999999999999999 kB\n";
        CHECK_EQ_INT(rsd_devmem_parse_meminfo(big, strlen(big), "MemTotal", &v), RSD_ERR_OVERFLOW);
        CHECK_EQ_INT(rsd_devmem_parse_meminfo(edge, strlen(edge), "MemTotal", &v), RSD_OK);
        CHECK(v == 18014398509481983ull * 1024);
        CHECK_EQ_INT(rsd_devmem_parse_meminfo(huge, strlen(huge), "MemTotal", &v), RSD_ERR_OVERFLOW);
        CHECK_EQ_INT(rsd_devmem_parse_meminfo("MemTotal: lots kB\n", 18, "MemTotal", &v), RSD_ERR_PAYLOAD);
        CHECK_EQ_INT(rsd_devmem_parse_meminfo("MemTotal: -5 kB\n", 16, "MemTotal", &v), RSD_ERR_PAYLOAD);
        CHECK_EQ_INT(rsd_devmem_parse_meminfo("MemTotal: kB\n", 13, "MemTotal", &v), RSD_ERR_PAYLOAD);
        CHECK_EQ_INT(rsd_devmem_parse_meminfo("MemTotal: 5 MB\n", 15, "MemTotal", &v), RSD_ERR_PAYLOAD);
        CHECK_EQ_INT(rsd_devmem_parse_meminfo("MemTotal: 5 kB x\n", 17, "MemTotal", &v), RSD_ERR_PAYLOAD);
        CHECK_EQ_INT(rsd_devmem_parse_meminfo("MemTotal:\n", 10, "MemTotal", &v), RSD_ERR_PAYLOAD);
        CHECK_EQ_INT(rsd_devmem_parse_meminfo("\0\0MemTotal: 3\n", 14, "MemTotal", &v), RSD_ERR_NOT_FOUND);
        CHECK_EQ_INT(rsd_devmem_parse_meminfo("x\nMemTotal:\t3\t kB \r\n", 20, "MemTotal", &v), RSD_OK);
        CHECK(v == 3 * 1024);
    }
    {   /* DRM fdinfo's units */
        const char *t = "drm-memory-vram:\t3 KiB\ndrm-resident-vram:\t2 MiB\ndrm-total-gtt:\t1 GiB\n"
                        "drm-memory-gtt: 17592186044416 MiB\n"; /* 2^44 MiB = 2^64 bytes */
        CHECK_EQ_INT(rsd_devmem_parse_meminfo(t, strlen(t), "drm-memory-vram", &v), RSD_OK);
        CHECK(v == 3 * 1024);
        CHECK_EQ_INT(rsd_devmem_parse_meminfo(t, strlen(t), "drm-resident-vram", &v), RSD_OK);
        CHECK(v == 2 * MiB);
        CHECK_EQ_INT(rsd_devmem_parse_meminfo(t, strlen(t), "drm-total-gtt", &v), RSD_ERR_PAYLOAD);
        CHECK_EQ_INT(rsd_devmem_parse_meminfo(t, strlen(t), "drm-memory-gtt", &v), RSD_ERR_OVERFLOW);
        CHECK_EQ_INT(rsd_devmem_parse_meminfo("a: 1 Ki\n", 8, "a", &v), RSD_ERR_PAYLOAD);
    }
    CHECK_EQ_INT(rsd_devmem_parse_meminfo("", 0, "MemTotal", &v), RSD_ERR_NOT_FOUND);
    CHECK_EQ_INT(rsd_devmem_parse_meminfo(k_meminfo, n, "", &v), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_devmem_parse_meminfo(k_meminfo, n, NULL, &v), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_devmem_parse_meminfo(NULL, 4, "MemTotal", &v), RSD_ERR_ARG);
}

/* A discrete AMD card, an APU, and the host: the pools, the carve-out folded into the
   host entry, own processes' resident sets, the pick. */
static void test_amd_and_host(void) {
    rsd_devmem *dm;
    rsd_devmem_dev d[RSD_DEVMEM_MAX_DEVICES], pk;
    const rsd_devmem_dev *c0, *c1, *h;
    int64_t pids[3] = {4242, 4343, 999999};
    int n;
    REQUIRE(new_root("devmem-amd") == 0);
    /* card0: an APU (no VRAM vendor): 512 MiB carve-out, a 32 GiB GTT */
    puts_("sys/class/drm/card0/device/mem_info_vram_total", "536870912\n");
    puts_("sys/class/drm/card0/device/mem_info_vram_used", "104857600\n");
    puts_("sys/class/drm/card0/device/mem_info_gtt_total", "34359738368\n");
    puts_("sys/class/drm/card0/device/mem_info_gtt_used", "1048576\n");
    /* card1: discrete, 24 GiB of GDDR6 with 3 GiB used; its device link names its PCI
       address, as sysfs's does */
    puts_("sys/devices/pci0000:00/0000:03:00.0/mem_info_vram_total", "25769803776\n");
    puts_("sys/devices/pci0000:00/0000:03:00.0/mem_info_vram_used", "3221225472\n");
    puts_("sys/devices/pci0000:00/0000:03:00.0/mem_info_vram_vendor", "samsung\n");
    puts_("sys/devices/pci0000:00/0000:03:00.0/mem_info_gtt_total", "34359738368\n");
    puts_("sys/devices/pci0000:00/0000:03:00.0/mem_info_gtt_used", "2097152\n");
    {
        char link[600];
        snprintf(link, sizeof link, "%s/sys/class/drm/card1", g_root);
        tp_mkdir(link);
        snprintf(link, sizeof link, "%s/sys/class/drm/card1/device", g_root);
        REQUIRE(symlink("../../../devices/pci0000:00/0000:03:00.0", link) == 0);
    }
    /* pid 4242 holds 1 GiB of card1 through one DRM client open on two descriptors, and
       256 MiB through a second client; pid 4343 has a client on another card */
    puts_("proc/4242/fdinfo/0", "pos:\t0\nflags:\t02\n");
    puts_("proc/4242/fdinfo/5", "pos:\t0\nflags:\t02100002\ndrm-driver:\tamdgpu\ndrm-pdev:\t0000:03:00.0\n"
                                "drm-client-id:\t17\ndrm-memory-vram:\t1048576 KiB\ndrm-memory-gtt:\t2048 KiB\n");
    puts_("proc/4242/fdinfo/6", "pos:\t0\nflags:\t02100002\ndrm-driver:\tamdgpu\ndrm-pdev:\t0000:03:00.0\n"
                                "drm-client-id:\t17\ndrm-memory-vram:\t1048576 KiB\n");
    puts_("proc/4242/fdinfo/7", "pos:\t0\ndrm-driver:\tamdgpu\ndrm-pdev:\t0000:03:00.0\n"
                                "drm-client-id:\t18\ndrm-resident-vram:\t256 MiB\n");
    puts_("proc/4343/fdinfo/3", "pos:\t0\ndrm-driver:\tamdgpu\ndrm-pdev:\t0000:04:00.0\n"
                                "drm-client-id:\t19\ndrm-memory-vram:\t4 KiB\n");
    puts_("proc/meminfo", k_meminfo);
    puts_("proc/4242/status", "Name:\tllama-server\nVmRSS:\t  1048576 kB\nThreads:\t9\n");
    puts_("proc/4343/status", "Name:\tllama-server\nVmRSS:\t  524288 kB\n");
    dm = probe("", "sys", "proc");
    REQUIRE(dm != NULL);
    CHECK(strstr(rsd_devmem_nvml_status(dm), "not used") != NULL);
    n = rsd_devmem_read(dm, pids, 3, d, RSD_DEVMEM_MAX_DEVICES);
    CHECK_EQ_INT(n, 3);
    c0 = find(d, n, "card0");
    c1 = find(d, n, "card1");
    h = find(d, n, "host");
    REQUIRE(c0 && c1 && h);
    CHECK_EQ_INT(c1->pool, RSD_DEVMEM_VRAM);
    CHECK_EQ_INT(c1->source, RSD_DEVMEM_AMDGPU);
    CHECK(c1->total_bytes == 24 * GiB && c1->used_bytes == 3 * GiB && c1->free_bytes == 21 * GiB);
    CHECK(c1->own_known && c1->own_bytes == GiB + 256 * MiB && c1->others_bytes == 3 * GiB - GiB - 256 * MiB);
    CHECK(c1->gtt_total_bytes == 32 * GiB && c1->gtt_used_bytes == 2 * MiB);
    CHECK_EQ_STR(rsd_devmem_pool_str(c1->pool), "vram");
    CHECK_EQ_INT(c0->pool, RSD_DEVMEM_HOST);
    CHECK(c0->unified && c0->total_bytes == 512 * MiB && c0->used_bytes == 100 * MiB);
    CHECK(c0->gtt_total_bytes == 32 * GiB);
    CHECK_EQ_STR(rsd_devmem_pool_str(c0->pool), "host/unified");
    /* host: MemTotal plus the carve-out; used = MemTotal - MemAvailable plus the carve-out's use */
    CHECK_EQ_INT(h->source, RSD_DEVMEM_MEMINFO);
    CHECK(h->unified);
    CHECK(h->total_bytes == 65536000ull * 1024 + 512 * MiB);
    CHECK(h->used_bytes == 25536000ull * 1024 + 100 * MiB);
    CHECK(h->free_bytes == 40000000ull * 1024 + 412 * MiB);
    CHECK(h->own_known && h->own_bytes == (1048576ull + 524288) * 1024); /* pid 999999 is gone: 0 */
    CHECK(h->others_bytes == h->used_bytes - h->own_bytes);
    /* the pick: the vram entry (the discrete card) */
    CHECK_EQ_INT(rsd_devmem_pick(d, n, &pk), RSD_OK);
    CHECK_EQ_STR(pk.name, "card1");
    CHECK(pk.total_bytes == 24 * GiB && pk.own_bytes == GiB + 256 * MiB && pk.own_known);
    /* only pid 4343 (a client on another card): card1 cannot tell ours apart */
    n = rsd_devmem_read(dm, pids + 1, 1, d, RSD_DEVMEM_MAX_DEVICES);
    c1 = find(d, n, "card1");
    CHECK(c1 && !c1->own_known && c1->others_bytes == 3 * GiB);
    /* a short output array: the first entries only */
    CHECK_EQ_INT(rsd_devmem_read(dm, NULL, 0, d, 1), 1);
    CHECK_EQ_STR(d[0].name, "card0");
    CHECK_EQ_INT(rsd_devmem_read(dm, NULL, 0, d, 0), 0);
    CHECK_EQ_INT(rsd_devmem_read(dm, NULL, 1, d, 4), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_devmem_read(dm, pids, RSD_DEVMEM_MAX_PIDS + 1, d, 4), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_devmem_read(NULL, NULL, 0, d, 4), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_devmem_read(dm, NULL, 0, NULL, 4), RSD_ERR_ARG);
    /* without the discrete card the pick is the host entry */
    CHECK_EQ_INT(rsd_devmem_pick(c0, 1, &pk), RSD_ERR_NOT_FOUND);
    CHECK_EQ_INT(rsd_devmem_pick(h, 1, &pk), RSD_OK);
    CHECK_EQ_STR(pk.name, "host");
    CHECK_EQ_INT(rsd_devmem_pick(NULL, 0, &pk), RSD_ERR_NOT_FOUND);
    rsd_devmem_destroy(dm);
}

/* Hostile sysfs and meminfo contents: garbage, overflow, used above total, missing and
   oversized files; none is reported as a figure it is not. */
static void test_hostile_files(void) {
    rsd_devmem *dm;
    rsd_devmem_dev d[RSD_DEVMEM_MAX_DEVICES];
    const rsd_devmem_dev *c;
    char *big;
    int n;
    REQUIRE(new_root("devmem-hostile") == 0);
    puts_("sys/class/drm/card0/device/mem_info_vram_total", "lots\n");
    puts_("sys/class/drm/card0/device/mem_info_vram_used", "1\n");
    puts_("sys/class/drm/card1/device/mem_info_vram_total", "99999999999999999999999\n");
    puts_("sys/class/drm/card1/device/mem_info_vram_used", "1\n");
    puts_("sys/class/drm/card1/device/mem_info_vram_vendor", "hynix\n");
    puts_("sys/class/drm/card2/device/mem_info_vram_total", "1073741824\n");
    puts_("sys/class/drm/card2/device/mem_info_vram_used", "4294967296\n"); /* above total */
    puts_("sys/class/drm/card2/device/mem_info_vram_vendor", "micron\n");
    puts_("sys/class/drm/card3/device/mem_info_vram_total", "18446744073709551615\n");
    puts_("sys/class/drm/card3/device/mem_info_vram_used", "18446744073709551615\n");
    puts_("sys/class/drm/card3/device/mem_info_vram_vendor", "x\n");
    puts_("sys/class/drm/card4/device/mem_info_vram_total", "1073741824\n"); /* no _used */
    puts_("sys/class/drm/card4/device/mem_info_vram_vendor", "x\n");
    put("sys/class/drm/card5/device/mem_info_vram_total", "", 0);         /* empty */
    put("sys/class/drm/card6/device/mem_info_vram_total", "10\0002\n", 5); /* a NUL inside */
    puts_("sys/class/drm/card6/device/mem_info_vram_used", "1\n");
    puts_("proc/meminfo", "MemTotal: 4096 kB\nMemAvailable: 9999999 kB\n"); /* available > total */
    puts_("proc/77/status", "VmRSS: 999999999999999999 kB\n");               /* overflows */
    dm = probe("", "sys", "proc");
    REQUIRE(dm != NULL);
    {
        int64_t pid = 77;
        n = rsd_devmem_read(dm, &pid, 1, d, RSD_DEVMEM_MAX_DEVICES);
    }
    CHECK_EQ_INT(n, 3); /* card2, card3, host */
    CHECK(!find(d, n, "card0") && !find(d, n, "card1") && !find(d, n, "card4") && !find(d, n, "card5") &&
          !find(d, n, "card6"));
    c = find(d, n, "card2");
    CHECK(c && c->total_bytes == GiB && c->used_bytes == GiB && c->free_bytes == 0);
    c = find(d, n, "card3");
    CHECK(c && c->total_bytes == UINT64_MAX && c->used_bytes == UINT64_MAX && c->free_bytes == 0);
    c = find(d, n, "host");
    CHECK(c && c->total_bytes == 4096 * 1024 && c->used_bytes == 0 && c->free_bytes == 4096 * 1024);
    CHECK(c && c->own_known && c->own_bytes == 0 && c->others_bytes == 0);
    /* meminfo: garbage, then no MemAvailable (an old kernel: MemFree), then oversized */
    puts_("proc/meminfo", "MemTotal: banana\nMemAvailable: 1 kB\n");
    n = rsd_devmem_read(dm, NULL, 0, d, RSD_DEVMEM_MAX_DEVICES);
    CHECK(n == 2 && !find(d, n, "host"));
    puts_("proc/meminfo", "MemTotal: 8 kB\nMemFree: 2 kB\n");
    n = rsd_devmem_read(dm, NULL, 0, d, RSD_DEVMEM_MAX_DEVICES);
    c = find(d, n, "host");
    CHECK(c && c->total_bytes == 8192 && c->free_bytes == 2048);
    big = (char *)malloc(RSD_DEVMEM_FILE_MAX + 100);
    REQUIRE(big);
    memset(big, ' ', RSD_DEVMEM_FILE_MAX + 100);
    memcpy(big, "MemTotal: 8 kB\nMemFree: 2 kB\n", 30);
    put("proc/meminfo", big, RSD_DEVMEM_FILE_MAX + 100);
    free(big);
    n = rsd_devmem_read(dm, NULL, 0, d, RSD_DEVMEM_MAX_DEVICES);
    CHECK(n == 2 && !find(d, n, "host"));
    rsd_devmem_destroy(dm);
    /* nothing there at all: no entries, no error */
    dm = probe("", "nothing", "nothing");
    REQUIRE(dm != NULL);
    CHECK_EQ_INT(rsd_devmem_read(dm, NULL, 0, d, RSD_DEVMEM_MAX_DEVICES), 0);
    rsd_devmem_destroy(dm);
}

/* A Jetson: the device tree says nvidia,tegra; NVML is not loaded; the host entry is
   the GPU's pool. */
static void test_tegra(void) {
    static const char compat[] = "nvidia,p3737-0000+p3701-0005\0nvidia,p3701-0005\0nvidia,tegra234\0";
    rsd_devmem *dm;
    rsd_devmem_dev d[4], pk;
    int n;
    REQUIRE(new_root("devmem-tegra") == 0);
    put("sys/firmware/devicetree/base/compatible", compat, sizeof compat - 1);
    puts_("proc/meminfo", k_meminfo);
    dm = probe("/nonexistent/libnvidia-ml.so.1", "sys", "proc");
    REQUIRE(dm != NULL);
    CHECK(strstr(rsd_devmem_nvml_status(dm), "Tegra") != NULL);
    n = rsd_devmem_read(dm, NULL, 0, d, 4);
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(d[0].source, RSD_DEVMEM_TEGRA);
    CHECK(d[0].unified && d[0].pool == RSD_DEVMEM_HOST && d[0].total_bytes == 65536000ull * 1024);
    CHECK_EQ_INT(rsd_devmem_pick(d, n, &pk), RSD_OK);
    CHECK_EQ_INT(pk.source, RSD_DEVMEM_TEGRA);
    rsd_devmem_destroy(dm);
    /* not a Tegra: another vendor's compatible list */
    put("sys/firmware/devicetree/base/compatible", "raspberrypi,5-model-b\0brcm,bcm2712\0", 35);
    dm = probe("", "sys", "proc");
    REQUIRE(dm != NULL);
    n = rsd_devmem_read(dm, NULL, 0, d, 4);
    CHECK(n == 1 && d[0].source == RSD_DEVMEM_MEMINFO && !d[0].unified);
    rsd_devmem_destroy(dm);
}

static int count_lines(const char *path, const char *what) {
    char line[64];
    int k = 0;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, what, strlen(what))) k++;
    fclose(f);
    return k;
}

/* NVML through the fake library: figures, own vs others by pid, devices that cannot
   report, a failing or unknowable process list, init once and shutdown once. */
static void test_nvml(void) {
    const char *lib = fake_nvml();
    char log[400];
    rsd_devmem *dm;
    rsd_devmem_dev d[RSD_DEVMEM_MAX_DEVICES], pk;
    const rsd_devmem_dev *g;
    int64_t pids[2] = {111, 333};
    int n;
    if (!lib) {
        printf("test_nvml: skipped (%s)\n", getenv("RSD_TEST_QEMU") ? "under qemu-user: the fake NVML is a host library"
                                                                  : "no build/tests/libfake_nvml.so");
        return;
    }
    REQUIRE(new_root("devmem-nvml") == 0);
    puts_("proc/meminfo", k_meminfo);
    snprintf(log, sizeof log, "%s/nvml.log", g_root);
    tp_setenv("FAKE_NVML_LOG", log);
    tp_setenv("FAKE_NVML_INIT_RC", NULL);
    /* dev0: 24 GiB, 10 GiB used: ours 4 GiB (pid 111) + 1 GiB (pid 333), a renderer 5 GiB;
       dev1 cannot report memory; dev2: 8 GiB, its process list fails */
    tp_setenv("FAKE_NVML", "25769803776,10737418240,111=4294967296,222=5368709120,333=1073741824;nomem;"
                           "8589934592,1073741824,procfail");
    dm = probe(lib, "sys", "proc");
    REQUIRE(dm != NULL);
    CHECK_EQ_STR(rsd_devmem_nvml_status(dm), "");
    n = rsd_devmem_read(dm, pids, 2, d, RSD_DEVMEM_MAX_DEVICES);
    CHECK_EQ_INT(n, 3);
    g = find(d, n, "nvml0");
    REQUIRE(g);
    CHECK(g->pool == RSD_DEVMEM_VRAM && g->source == RSD_DEVMEM_NVML);
    CHECK(g->total_bytes == 24 * GiB && g->used_bytes == 10 * GiB && g->free_bytes == 14 * GiB);
    CHECK(g->own_known && g->own_bytes == 5 * GiB && g->others_bytes == 5 * GiB);
    CHECK(!find(d, n, "nvml1"));
    g = find(d, n, "nvml2");
    REQUIRE(g);
    CHECK(!g->own_known && g->others_bytes == GiB);
    CHECK(find(d, n, "host") != NULL);
    CHECK_EQ_INT(rsd_devmem_pick(d, n, &pk), RSD_OK); /* both GPUs, summed */
    CHECK(pk.total_bytes == 32 * GiB && pk.used_bytes == 11 * GiB && pk.others_bytes == 6 * GiB);
    CHECK(!pk.own_known && strstr(pk.name, "x2") != NULL);
    /* re-scripted between reads: the renderer has gone; memory the driver reports per
       process but cannot measure (WDDM); more processes than the buffer */
    tp_setenv("FAKE_NVML", "25769803776,4294967296,111=4294967296;8589934592,0,111=na;8589934592,5,many");
    n = rsd_devmem_read(dm, pids, 2, d, RSD_DEVMEM_MAX_DEVICES);
    CHECK_EQ_INT(n, 4);
    g = find(d, n, "nvml0");
    CHECK(g && g->own_known && g->own_bytes == 4 * GiB && g->others_bytes == 0);
    g = find(d, n, "nvml1");
    CHECK(g && !g->own_known && g->total_bytes == 8 * GiB && g->used_bytes == 0);
    g = find(d, n, "nvml2");
    CHECK(g && !g->own_known && g->used_bytes == 5);
    /* a hostile library: used above total, an own process above used */
    tp_setenv("FAKE_NVML", "100,500,111=900");
    n = rsd_devmem_read(dm, pids, 2, d, RSD_DEVMEM_MAX_DEVICES);
    g = find(d, n, "nvml0");
    CHECK(g && g->used_bytes == 100 && g->free_bytes == 0 && g->own_bytes == 100 && g->others_bytes == 0);
    rsd_devmem_destroy(dm);
    CHECK_EQ_INT(count_lines(log, "init"), 1);
    CHECK_EQ_INT(count_lines(log, "shutdown"), 1);
    /* nvmlInit_v2 fails: no NVML entries, the reason in words, no shutdown */
    tp_setenv("FAKE_NVML_INIT_RC", "9");
    dm = probe(lib, "sys", "proc");
    REQUIRE(dm != NULL);
    CHECK(strstr(rsd_devmem_nvml_status(dm), "nvmlInit_v2 failed (NVML error 9)") != NULL);
    n = rsd_devmem_read(dm, NULL, 0, d, RSD_DEVMEM_MAX_DEVICES);
    CHECK(n == 1 && !strcmp(d[0].name, "host"));
    rsd_devmem_destroy(dm);
    CHECK_EQ_INT(count_lines(log, "init"), 2);
    CHECK_EQ_INT(count_lines(log, "shutdown"), 1);
    tp_setenv("FAKE_NVML_INIT_RC", NULL);
    /* the library path from the environment unless ignore_env */
    {
        rsd_devmem_desc dd;
        memset(&dd, 0, sizeof dd);
        dd.sys_root = dd.proc_root = g_root;
        tp_setenv("RESIDENCY_NVML", lib);
        dm = rsd_devmem_create(&dd);
        REQUIRE(dm != NULL);
        CHECK_EQ_STR(rsd_devmem_nvml_status(dm), "");
        rsd_devmem_destroy(dm);
        dd.ignore_env = true;
        dd.nvml_path = "/nonexistent/libnvidia-ml.so.1";
        dm = rsd_devmem_create(&dd);
        REQUIRE(dm != NULL);
        CHECK(strstr(rsd_devmem_nvml_status(dm), "not loaded") != NULL);
        rsd_devmem_destroy(dm);
        tp_setenv("RESIDENCY_NVML", NULL);
    }
    /* a library without the entry points (this very test's libc is not NVML) */
    dm = probe("libc.so.6", "sys", "proc");
    REQUIRE(dm != NULL);
    CHECK(strstr(rsd_devmem_nvml_status(dm), "no nvmlInit_v2") != NULL);
    rsd_devmem_destroy(dm);
    tp_setenv("FAKE_NVML", NULL);
    tp_setenv("FAKE_NVML_LOG", NULL);
}

static int g_allocs, g_frees;
static void *count_alloc(size_t n, void *u) { (void)u; g_allocs++; return malloc(n); }
static void count_free(void *p, void *u) { (void)u; g_frees++; free(p); }

static void test_desc(void) {
    rsd_devmem_desc d;
    rsd_devmem *dm;
    char longp[RSD_DEVMEM_PATH_MAX + 8];
    memset(&d, 0, sizeof d);
    d.nvml_path = "";
    d.allocator.alloc_fn = count_alloc;
    d.allocator.free_fn = count_free;
    dm = rsd_devmem_create(&d);
    REQUIRE(dm != NULL);
    rsd_devmem_destroy(dm);
    CHECK(g_allocs == 1 && g_frees == 1);
    d.allocator.free_fn = NULL; /* both or neither */
    CHECK(rsd_devmem_create(&d) == NULL);
    memset(&d, 0, sizeof d);
    memset(longp, 'a', sizeof longp - 1);
    longp[sizeof longp - 1] = 0;
    d.sys_root = longp;
    CHECK(rsd_devmem_create(&d) == NULL);
    rsd_devmem_destroy(NULL);
    CHECK_EQ_STR(rsd_devmem_nvml_status(NULL), "no probe");
    CHECK_EQ_STR(rsd_devmem_pool_str(0), "?");
    /* the real host, whatever it has: every entry is consistent */
    {
        rsd_devmem_dev dv[RSD_DEVMEM_MAX_DEVICES];
        int i, n;
        memset(&d, 0, sizeof d);
        d.ignore_env = true;
        dm = rsd_devmem_create(&d);
        REQUIRE(dm != NULL);
        n = rsd_devmem_read(dm, NULL, 0, dv, RSD_DEVMEM_MAX_DEVICES);
        CHECK(n >= 0);
        for (i = 0; i < n; i++)
            CHECK(dv[i].used_bytes <= dv[i].total_bytes && dv[i].free_bytes == dv[i].total_bytes - dv[i].used_bytes &&
                  dv[i].own_bytes + dv[i].others_bytes == dv[i].used_bytes);
        rsd_devmem_destroy(dm);
    }
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    RUN(test_parse_u64);
    RUN(test_parse_meminfo);
    RUN(test_amd_and_host);
    RUN(test_hostile_files);
    RUN(test_tegra);
    RUN(test_nvml);
    RUN(test_desc);
    if (g_root[0]) tp_remove_tree(g_root);
    return RSD_TEST_END();
}

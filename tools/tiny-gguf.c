/* tiny-gguf -- write tiny random-weight llama GGUF models that a real llama-server
   loads in milliseconds (and answers chat with garbage text): for trying rsd-ensure
   and rsd-serve against the real thing without downloading a model. `make demo` uses
   it when it finds a llama-server.

       tiny-gguf DIR              tiny-a.gguf .. tiny-e.gguf and broken.gguf (its load fails)
       tiny-gguf DIR NAME...      DIR/NAME.gguf for each NAME (NAME "broken" fails to load)

   DIR must exist. Every model is about 240 KB: llama architecture, 1 block, n_embd 64,
   context length 2048 (see tests/tiny_gguf.h). Exit 0, 1 when a file cannot be
   written, 64 on bad usage. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../tests/tiny_gguf.h"

int main(int argc, char **argv) {
    char path[1200];
    int i;
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        fprintf(stderr, "usage: tiny-gguf DIR [NAME...]\n");
        return 64;
    }
    if (argc == 2) {
        if (tiny_gguf_write_set(argv[1]) != 0) { perror(argv[1]); return 1; }
        return 0;
    }
    for (i = 2; i < argc; i++) {
        uint64_t seed = 1469598103934665603ull;
        const char *p;
        if (!argv[i][0] || strchr(argv[i], '/')) { fprintf(stderr, "tiny-gguf: bad model name '%s'\n", argv[i]); return 64; }
        for (p = argv[i]; *p; p++) seed = (seed ^ (unsigned char)*p) * 1099511628211ull;
        if ((size_t)snprintf(path, sizeof path, "%s/%s.gguf", argv[1], argv[i]) >= sizeof path) {
            fprintf(stderr, "tiny-gguf: path too long\n");
            return 64;
        }
        if (tiny_gguf_write(path, argv[i], seed, 2048, !strcmp(argv[i], "broken")) != 0) { perror(path); return 1; }
    }
    return 0;
}

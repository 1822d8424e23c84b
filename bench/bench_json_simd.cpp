// simdjson 3.x DOM peer for bench_json.c (parser reused, input padded once outside timing).
#include <simdjson.h>
#include <cstddef>
#include <cstdint>

struct bench_simd {
    simdjson::dom::parser parser;
    simdjson::padded_string input;
};

extern "C" void *bench_simd_new(const char *s, size_t n) {
    bench_simd *b = new bench_simd();
    b->input = simdjson::padded_string(s, n);
    return b;
}

extern "C" void bench_simd_free(void *p) { delete static_cast<bench_simd *>(p); }

// Parses once; returns 0 on success.
extern "C" int bench_simd_parse(void *p) {
    bench_simd *b = static_cast<bench_simd *>(p);
    simdjson::dom::element doc;
    return b->parser.parse(b->input).get(doc) == simdjson::SUCCESS ? 0 : 1;
}

// Parse + extract (id length, status.value length, --port value, tag count) for a
// router /v1/models payload; returns a checksum (or -1).
extern "C" long bench_simd_extract(void *p) {
    bench_simd *b = static_cast<bench_simd *>(p);
    simdjson::dom::element doc;
    long sum = 0;
    if (b->parser.parse(b->input).get(doc) != simdjson::SUCCESS) return -1;
    simdjson::dom::array data;
    if (doc["data"].get(data) != simdjson::SUCCESS) return -1;
    for (simdjson::dom::element m : data) {
        std::string_view id, val;
        if (m["id"].get(id) == simdjson::SUCCESS) sum += (long)id.size();
        simdjson::dom::object st;
        if (m["status"].get(st) == simdjson::SUCCESS) {
            if (st["value"].get(val) == simdjson::SUCCESS) sum += (long)val.size();
            simdjson::dom::array args;
            if (st["args"].get(args) == simdjson::SUCCESS) {
                bool next = false;
                for (simdjson::dom::element a : args) {
                    std::string_view s;
                    if (a.get(s) != simdjson::SUCCESS) continue;
                    if (next) {
                        long port = 0;
                        for (char c : s) port = port * 10 + (c - '0');
                        sum += port;
                        break;
                    }
                    next = s == "--port";
                }
            }
        }
        simdjson::dom::array tags;
        if (m["tags"].get(tags) == simdjson::SUCCESS) sum += (long)tags.size();
    }
    return sum;
}

/*
 * What a call copies: an LD_PRELOAD shim that counts every memcpy and memmove of at
 * least COPIES_MIN bytes (default 64) by the size and the return address of its caller,
 * and writes them with the process's memory map to /tmp/copies.PID when the process
 * exits. `bench/copies.py` turns the file into bytes copied a call by function.
 *
 *     gcc -O1 -fno-builtin -fno-tree-loop-distribute-patterns -shared -fPIC \
 *         -o /tmp/copies.so bench/copies.c
 *     LD_PRELOAD=/tmp/copies.so target/release/callcost tower 2000
 *     LD_PRELOAD=/tmp/copies.so target/release/callcost hyper 2000
 *     python3 bench/copies.py target/release/callcost 4000 /tmp/copies.A /tmp/copies.B
 *
 * Large copies are what moving a big value (a call's future, a request, a report) costs:
 * each byte is read and written again, and the write to memory the call has not touched
 * yet misses the data cache (cachegrind counts memcpy as the largest source of baton's
 * extra data-cache misses). The copy itself is a plain byte loop: the counts, not the
 * timing, are what this is for. Not part of the tests: a measuring tool, run by hand.
 */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define SLOTS 65536

static struct {
    void *caller;
    size_t size;
    unsigned long count;
} table[SLOTS];
static volatile int counting = 0;
static size_t min_size = 64;

__attribute__((constructor)) static void start(void) {
    const char *min = getenv("COPIES_MIN");
    if (min)
        min_size = (size_t)atol(min);
    if (min_size < 1)
        min_size = 1; /* a size of 0 marks a slot not yet filled */
    counting = 1;
}

/* A byte loop the compiler does not turn back into a call to memcpy. */
static void copy(unsigned char *d, const unsigned char *s, size_t n) {
    if (d < s || d >= s + n) {
        for (size_t i = 0; i < n; i++) {
            __asm__ volatile("" ::: "memory");
            d[i] = s[i];
        }
    } else {
        for (size_t i = n; i > 0; i--) {
            __asm__ volatile("" ::: "memory");
            d[i - 1] = s[i - 1];
        }
    }
}

/* Called from every thread of the process (callcost's provider runs in it): a slot is
 * claimed by compare-and-swap and counted with an atomic add, so no copy is lost. */
static void count(void *caller, size_t size) {
    if (!counting || size < min_size)
        return;
    uintptr_t h = ((uintptr_t)caller * 2654435761u ^ size * 40503u) % SLOTS;
    for (size_t k = 0; k < SLOTS; k++) {
        size_t j = (h + k) % SLOTS;
        void *seen = __atomic_load_n(&table[j].caller, __ATOMIC_ACQUIRE);
        if (!seen) {
            void *empty = NULL;
            if (__atomic_compare_exchange_n(&table[j].caller, &empty, caller, 0,
                                            __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
                __atomic_store_n(&table[j].size, size, __ATOMIC_RELEASE);
                __atomic_fetch_add(&table[j].count, 1, __ATOMIC_RELAXED);
                return;
            }
            seen = empty; /* another thread claimed it first: read what it holds */
        }
        if (seen == caller) {
            /* The claiming thread may not have stored the size yet: wait for it. */
            size_t held;
            while (!(held = __atomic_load_n(&table[j].size, __ATOMIC_ACQUIRE)))
                ;
            if (held == size) {
                __atomic_fetch_add(&table[j].count, 1, __ATOMIC_RELAXED);
                return;
            }
        }
    }
}

void *memcpy(void *d, const void *s, size_t n) {
    count(__builtin_return_address(0), n);
    copy(d, s, n);
    return d;
}

void *memmove(void *d, const void *s, size_t n) {
    count(__builtin_return_address(0), n);
    copy(d, s, n);
    return d;
}

__attribute__((destructor)) static void finish(void) {
    counting = 0;
    char path[64];
    snprintf(path, sizeof path, "/tmp/copies.%d", (int)getpid());
    FILE *out = fopen(path, "w");
    if (!out)
        return;
    FILE *maps = fopen("/proc/self/maps", "r");
    char line[512];
    while (maps && fgets(line, sizeof line, maps))
        fprintf(out, "M %s", line);
    if (maps)
        fclose(maps);
    for (size_t j = 0; j < SLOTS; j++)
        if (table[j].caller)
            fprintf(out, "R %p %zu %lu\n", table[j].caller, table[j].size, table[j].count);
    fclose(out);
}

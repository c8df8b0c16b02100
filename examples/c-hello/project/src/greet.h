#ifndef GREET_H
#define GREET_H
#include <stddef.h>

/* Writes "hello, NAME!" into out (at most size bytes, always terminated); returns the length it needed. */
size_t greet(const char *name, char *out, size_t size);

#endif

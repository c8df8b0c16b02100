#include <stdio.h>
#include "greet.h"

size_t greet(const char *name, char *out, size_t size) {
  int n = snprintf(out, size, "hello, %s!", (name && *name) ? name : "world");
  return n < 0 ? 0 : (size_t)n;
}

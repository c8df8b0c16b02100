#include <stdio.h>
#include <string.h>
#include "greet.h"

static int failures = 0;
#define CHECK(cond) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); failures++; } } while (0)

int main(void) {
  char buf[64];
  CHECK(greet("ada", buf, sizeof buf) == 11 && strcmp(buf, "hello, ada!") == 0);
  CHECK(greet("", buf, sizeof buf) == 13 && strcmp(buf, "hello, world!") == 0);
  CHECK(greet(NULL, buf, sizeof buf) == 13);
  char tiny[6];
  CHECK(greet("ada", tiny, sizeof tiny) == 11 && strcmp(tiny, "hello") == 0);
  printf("%d checks failed\n", failures);
  return failures ? 1 : 0;
}

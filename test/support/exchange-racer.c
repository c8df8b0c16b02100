/* Swaps two names of one directory with renameat2(RENAME_EXCHANGE) in a loop, as a hostile step
 * does to time a directory-for-symlink swap against the host's reads. Static: runs in `tiny`. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif
int main(int argc, char **argv) {
  if (argc != 3 && argc != 4) return 2;
  /* argv[3]: a file made once the first exchange is done, for the test to wait on. */
  if (syscall(SYS_renameat2, AT_FDCWD, argv[1], AT_FDCWD, argv[2], RENAME_EXCHANGE) != 0) { perror("renameat2"); return 1; }
  if (argc == 4) close(open(argv[3], O_CREAT | O_WRONLY, 0644));
  for (unsigned long i = 0;; i++)
    if (syscall(SYS_renameat2, AT_FDCWD, argv[1], AT_FDCWD, argv[2], RENAME_EXCHANGE) != 0) { perror("renameat2"); return 1; }
}

/*
 * start-shim.c: preloaded (LD_PRELOAD) by scripts/release's tests into the
 * agent and a test program, it stands between the program's start and
 * glibc's __libc_start_main, and exits 42 if the program passes no init
 * function: glibc 2.28 would then run none of its constructors (2.34 and
 * later run them anyway, so without it a test here could not tell).
 * BASE is the architecture's base glibc version (GLIBC_2.2.5, GLIBC_2.17).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <unistd.h>

typedef int (*start_fn)(int (*)(int, char **, char **), int, char **, void (*)(int, char **, char **), void (*)(void),
                        void (*)(void), void *);

int __libc_start_main(int (*main)(int, char **, char **), int argc, char **argv, void (*init)(int, char **, char **),
                      void (*fini)(void), void (*rtld_fini)(void), void *stack_end) {
	if (init == NULL) {
		static const char msg[] = "start-shim: __libc_start_main called with no init function\n";
		write(2, msg, sizeof msg - 1);
		_exit(42);
	}
	start_fn real = (start_fn)dlvsym(RTLD_NEXT, "__libc_start_main", BASE);
	if (real == NULL) {
		static const char msg[] = "start-shim: no __libc_start_main@" BASE "\n";
		write(2, msg, sizeof msg - 1);
		_exit(43);
	}
	return real(main, argc, argv, init, fini, rtld_fini, stack_end);
}

/*
 * glibc-start.c: linked into the agent's release build (release.sh), so
 * that its start file does not need glibc 2.34.
 *
 * Since glibc 2.34, crt1.o (Scrt1.o) calls __libc_start_main@GLIBC_2.34,
 * which runs the program's constructors itself; before, it called the
 * base version, passing __libc_csu_init, which ran them. This file defines
 * __wrap___libc_start_main, where the link's --wrap sends crt1's call
 * rather than to libc, and calls libc's base version with an init
 * function of its own that runs the constructors as __libc_csu_init did
 * for a dynamic program (_init, then init_array; the dynamic linker runs
 * preinit_array itself). Every glibc from 2.17 on takes that call: a newer
 * one sees a non-null init and runs it, as it does for any binary built
 * before 2.34. Destructors (fini_array) the dynamic linker runs on every
 * glibc.
 */
#include <stddef.h>

#if defined(__x86_64__)
#define FC_GLIBC_BASE "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define FC_GLIBC_BASE "GLIBC_2.17"
#else
#error "glibc-start.c: the release builds linux/amd64 and linux/arm64 only"
#endif

typedef int (*main_fn)(int, char **, char **);
typedef void (*init_fn)(int, char **, char **);

/* The linker defines these around the sections. */
extern init_fn __init_array_start[] __attribute__((visibility("hidden")));
extern init_fn __init_array_end[] __attribute__((visibility("hidden")));
/* crti.o and crtn.o make _init from the .init sections. */
extern void _init(void);

/* libc's __libc_start_main at its base version. */
extern int fc_libc_start_main(main_fn main, int argc, char **argv, void (*init)(int, char **, char **),
                              void (*fini)(void), void (*rtld_fini)(void), void *stack_end);
__asm__(".symver fc_libc_start_main,__libc_start_main@" FC_GLIBC_BASE);

static void fc_init(int argc, char **argv, char **envp) {
	_init();
	size_t n = (size_t)(__init_array_end - __init_array_start);
	for (size_t i = 0; i < n; i++)
		__init_array_start[i](argc, argv, envp);
}

/* crt1's call, redirected here by the link's --wrap=__libc_start_main: a
 * function of the program named __libc_start_main would be exported, and
 * the dynamic linker would bind libc's base version, asked for above, to it. */
int __wrap___libc_start_main(main_fn main, int argc, char **argv, void (*init)(void), void (*fini)(void),
                             void (*rtld_fini)(void), void *stack_end) {
	(void)init;
	(void)fini;
	return fc_libc_start_main(main, argc, argv, fc_init, NULL, rtld_fini, stack_end);
}

/* dockerlet's pause: hold the pod's namespaces; exit 0 on SIGTERM or SIGINT. x86_64 Linux. */
    .globl _start
    .text
_start:
    mov $13, %eax            /* rt_sigaction(SIGTERM, &act, NULL, 8) */
    mov $15, %edi
    lea act(%rip), %rsi
    xor %edx, %edx
    mov $8, %r10d
    syscall
    mov $13, %eax            /* rt_sigaction(SIGINT, &act, NULL, 8) */
    mov $2, %edi
    syscall
1:  mov $34, %eax            /* pause() */
    syscall
    jmp 1b
on_signal:
    xor %edi, %edi           /* exit_group(0) */
    mov $231, %eax
    syscall
    .data
    .balign 8
act:
    .quad on_signal          /* sa_handler */
    .quad 0x04000000         /* sa_flags: SA_RESTORER */
    .quad on_signal          /* sa_restorer (never returns to it) */
    .quad 0                  /* sa_mask */

// Fiber context switch for the emulator runtime.
//   void emu_switch(void** save_sp, void* new_sp)
// saves the callee-saved registers on the current stack, stores the stack pointer in *save_sp,
// loads new_sp and restores the registers saved there. A fresh fiber's stack is prepared by
// emu_fiber_init (runtime.cpp) so that the first switch "returns" into emu_fiber_start, which
// calls fn(arg) with fn and arg taken from callee-saved registers.
#if defined(__APPLE__)
#define SYM(x) _##x
#else
#define SYM(x) x
#endif

#if defined(__x86_64__)
        .text
        .globl SYM(emu_switch)
        .globl SYM(emu_fiber_start)
#if !defined(__APPLE__)
        .type emu_switch, @function
        .type emu_fiber_start, @function
#endif
        .p2align 4
SYM(emu_switch):
        pushq %rbp
        pushq %rbx
        pushq %r12
        pushq %r13
        pushq %r14
        pushq %r15
        subq $8, %rsp
        stmxcsr (%rsp)
        fnstcw 4(%rsp)
        movq %rsp, (%rdi)
        movq %rsi, %rsp
        ldmxcsr (%rsp)
        fldcw 4(%rsp)
        addq $8, %rsp
        popq %r15
        popq %r14
        popq %r13
        popq %r12
        popq %rbx
        popq %rbp
        ret

        .p2align 4
SYM(emu_fiber_start):
        // r12 = arg, r13 = fn; the stack is 16-byte aligned here.
        movq %r12, %rdi
        callq *%r13
        ud2

#elif defined(__aarch64__)
        .text
        .globl SYM(emu_switch)
        .globl SYM(emu_fiber_start)
        .p2align 2
SYM(emu_switch):
        sub sp, sp, #176
        stp x19, x20, [sp, #0]
        stp x21, x22, [sp, #16]
        stp x23, x24, [sp, #32]
        stp x25, x26, [sp, #48]
        stp x27, x28, [sp, #64]
        stp x29, x30, [sp, #80]
        stp d8, d9, [sp, #96]
        stp d10, d11, [sp, #112]
        stp d12, d13, [sp, #128]
        stp d14, d15, [sp, #144]
        mrs x9, fpcr
        str x9, [sp, #160]
        mov x9, sp
        str x9, [x0]
        mov sp, x1
        ldp x19, x20, [sp, #0]
        ldp x21, x22, [sp, #16]
        ldp x23, x24, [sp, #32]
        ldp x25, x26, [sp, #48]
        ldp x27, x28, [sp, #64]
        ldp x29, x30, [sp, #80]
        ldp d8, d9, [sp, #96]
        ldp d10, d11, [sp, #112]
        ldp d12, d13, [sp, #128]
        ldp d14, d15, [sp, #144]
        ldr x9, [sp, #160]
        msr fpcr, x9
        add sp, sp, #176
        ret

        .p2align 2
SYM(emu_fiber_start):
        // x19 = arg, x20 = fn
        mov x0, x19
        blr x20
        brk #0
#else
#error "emulator fibers support x86-64 and arm64 only"
#endif

#if defined(__linux__) && defined(__ELF__)
        .section .note.GNU-stack,"",%progbits
#endif

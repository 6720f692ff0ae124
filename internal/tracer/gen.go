package tracer

// The BPF program is compiled by bpf2go; its Go bindings (iotrace_x86_bpfel.go)
// and object (iotrace_x86_bpfel.o) are committed, so only changing the C
// needs clang. See doc.go for the toolchain.
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -D__TARGET_ARCH_x86" -target amd64 -type record iotrace bpf/iotrace.c -- -I./bpf

//go:build go1.24

#include "textflag.h"

// func prefetch(p uintptr)
TEXT ·prefetch(SB), NOSPLIT|NOFRAME, $0-8
	MOVD p+0(FP), R0
	PRFM (R0), PLDL1KEEP
	RET

"""LLVM helpers every lowering uses: the `Emitter` with its dtype tables and the math
expansions (exp, log, tanh, erf, ...) built from plain instructions."""

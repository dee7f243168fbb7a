"""Single irregular ops (reductions, data movement, random bits, matmul) as LLVM functions
with a C ABI: one rule per primitive, and how they are compiled and called. Importing this
package imports every module of it (`core.registration`), so `rule.RULES` holds every
rule from then on."""

from stageflow.core.registration import import_modules

import_modules(__name__, __path__)

"""Staging: `sf.function` and its trace cache, concrete and staged-gradient functions, and the
one compile driver every path goes through (graph -> IR -> passes -> executable or
library)."""

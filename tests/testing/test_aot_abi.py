"""The AOT C ABI campaign (`stageflow.testing.aot_abi`): random good and bad calls from a
driver under AddressSanitizer crash nothing and write nowhere they should not, and the
classifier does see an ASan report, a crash and a write outside a buffer."""

from __future__ import annotations

import os
import shutil
import subprocess

from stageflow.testing.aot_abi import Library, build, run_campaign


def test_a_slice_of_the_campaign_crashes_nothing():
    tallies = run_campaign(60, 2026)
    for name, tally in tallies.items():
        assert tally.outcomes["calls"] == 60, name
        for outcome in ("crash", "asan report", "guard zone"):
            assert tally.outcomes[outcome] == 0, (name, tally.first)
    for name in tallies:
        assert tallies[name].outcomes["wrong result"] == 0, tallies[name].first
        assert tallies[name].outcomes["documented error"] > 0
        assert tallies[name].outcomes["correct result"] > 0


def broken(fault: str, *flags: str):
    """Builds the library's real driver, then puts in its place one (compiled with
    `flags`) that calls the real one after doing `fault` (C statements run first)."""
    def make(library: Library, folder: str) -> str:
        real = build(library, folder)
        source = os.path.join(folder, "broken.c")
        with open(source, "w", encoding="utf-8") as file:
            file.write("#include <stdlib.h>\n#include <string.h>\n#include <unistd.h>\n"
                       "int main(int argc, char **argv) {\n" + fault +
                       f'\n  execv("{real}", argv);\n  return 1;\n}}\n')
        path = os.path.join(folder, "broken")
        subprocess.run([shutil.which("gcc"), *flags, "-O0", source, "-o", path], check=True)
        return path
    return make


def test_the_classifier_sees_asan_reports_and_crashes():
    overflow = "  char *p = malloc(4); volatile char c = p[argc + 8]; (void)c;"
    segfault = "  volatile int *p = (int *)16; *p = 1;"
    tallies = run_campaign(3, 1, ["elementwise", "frozen"], drivers={
        "elementwise": broken(overflow, "-fsanitize=address"), "frozen": broken(segfault)})
    assert tallies["elementwise"].outcomes["asan report"] == 1
    assert "heap-buffer-overflow" in tallies["elementwise"].first[0]
    assert tallies["frozen"].outcomes["crash"] == 1

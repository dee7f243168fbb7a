"""``stageflow devices``: the devices stageflow can run on, with their memory (with
``--address``, a Ray cluster's workers' too)."""

from __future__ import annotations

import argparse

from stageflow import distribute
from stageflow.cli.io import CommandError
from stageflow.cli.staging import set_logical_cpus
from stageflow.runtime.devices import all_devices, gpu_unavailable_reason


def run(args: argparse.Namespace) -> int:
    """One line per device (name, kind, memory), then why there is no GPU if there is none."""
    set_logical_cpus(args)
    if args.address:
        distribute.connect(jobs={"worker": args.workers}, address=args.address)
    try:
        found = all_devices()
        for device in found:
            print(device.describe())
        if not any(device.kind == "GPU" for device in found):
            print(f"no GPU: {gpu_unavailable_reason()}")
    except RuntimeError as error:  # e.g. no thread left for one more logical CPU
        raise CommandError(f"cannot start the devices: {error}") from None
    finally:
        if args.address:
            distribute.shutdown()
    return 0

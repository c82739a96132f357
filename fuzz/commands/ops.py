"""``nnfuzz ops``: the operations the reference driver declares, read from the registry."""

from __future__ import annotations

import argparse
import sys

from driver.hal.types import STANDARD_OPERATIONS, operand_type_name
from driver.operations import REGISTRY, family_of


def register(sub) -> None:
    p = sub.add_parser(
        "ops",
        help="list operations, their HAL versions and operand types",
        description="List the standard operations with the family module that declares "
        "them, the HAL version that introduced them and their signatures.",
    )
    p.add_argument("names", nargs="*", help="only these operations (e.g. CONV_2D ADD)")
    p.add_argument("-s", "--signatures", action="store_true", help="print every signature")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    wanted = {n.upper() for n in args.names}
    unknown = sorted(wanted - {op.name for op in STANDARD_OPERATIONS})
    if unknown:
        print(f"nnfuzz ops: unknown operation {', '.join(unknown)}", file=sys.stderr)
        return 2
    declared = 0
    for op in STANDARD_OPERATIONS:
        if wanted and op.name not in wanted:
            continue
        decl = REGISTRY.get(op)
        if decl is None:
            print(f"{op.value:4} {op.name:32} (not declared)")
            continue
        declared += 1
        print(
            f"{op.value:4} {op.name:32} HAL {decl.min_version.label}  {family_of(op):16} "
            f"{len(decl.signatures)} signatures"
        )
        if args.signatures:
            for s in decl.signatures:
                ins = ", ".join(operand_type_name(t) for t in s.inputs)
                outs = ", ".join(operand_type_name(t) for t in s.outputs)
                opt = f"  optional {sorted(s.optional)}" if s.optional else ""
                print(f"         {s.version.label}: ({ins}) -> ({outs}){opt}")
    if not wanted:
        print(f"{declared}/{len(STANDARD_OPERATIONS)} operations declared")
    return 0

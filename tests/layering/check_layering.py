#!/usr/bin/env python3
"""The layering test: no file includes a layer (or a kernels/ or runtime/ folder) that the
dependency order puts above its own.

The orders are read from kernels/README.md, the one place they are written:

    Layers:  common → analysis → kernels → runtime → chapters → tools
    Folders: primitives → kv → attention → decode → fused → timing → registry
    Runtime: gguf → tokenizer → paged → collective → model → parallel → engine → serving

A file in layer L may include files of L and of the layers before it; a file in kernels/F may
include kernels/ folders up to F ("registry" names the files directly in kernels/, the top), and a
file in runtime/F runtime/ folders up to F. A source file in a kernels/ or runtime/ folder that its
order does not name is reported.
Only quoted includes of repository paths are checked ("kernels/decode/decode.h"); system
headers and the emulator's own include path ("simt/simt.h", which is common/simt) are common.

It also keeps one request's state in one place (the runtime's "one sequence, one plan"):

  - exactly one definition of a type named Sequence in runtime/ (`struct Sequence {` or
    `class Sequence {`/`: …`), and it is runtime/engine/sequence.h's;
  - no per-sequence state in runtime/paged/ (the block manager keeps block-level state only and
    operates on the tables the sequences hold): no map keyed by an integer id
    (`std::map<int64_t, …>`, `std::unordered_map<int, …>`, …) and no token list member
    (`std::vector<int32_t> tokens…;`);
  - no runtime/paged/paged_kv.h (the copy of the manager's tables into the cache; the model
    runner applies the step plan instead);
  - the KV cache kept across steps is storage: no `KvCache` data member in runtime/ (a runner
    keeps a KvStorage; each step's KvCache is a view whose tables and lengths come from the
    plan), and kernels/kv/kv_storage.h names no block table or length.

    check_layering.py ROOT          check the tree at ROOT; exit 1 and list every violation
    check_layering.py --self-test   check that an upward include and each state rule is caught
"""
import os
import re
import sys
import tempfile

SOURCE_SUFFIXES = (".h", ".hpp", ".cpp", ".cu", ".cuh")
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([^"]+)"', re.MULTILINE)


ORDER_KEYS = ("Layers", "Folders", "Runtime")
# The layers whose folders have an order of their own: the layer, and the key of its order.
FOLDER_ORDERS = {"kernels": "Folders", "runtime": "Runtime"}


def read_orders(root):
    """The orders written in kernels/README.md: the layers, and per layer with folders
    (FOLDER_ORDERS) its folders, as lists of names."""
    text = open(os.path.join(root, "kernels", "README.md"), encoding="utf-8").read()
    orders = {}
    for key in ORDER_KEYS:
        match = re.search(r"^\s*" + key + r":\s*(.+)$", text, re.MULTILINE)
        if not match:
            sys.exit(f"kernels/README.md: no line '{key}: a → b → …' (the order this test checks)")
        orders[key] = [name.strip() for name in match.group(1).split("→")]
    return orders["Layers"], {layer: orders[key] for layer, key in FOLDER_ORDERS.items()}


def rank_of(path, layers, folders):
    """(layer index, folder index) of a repository path, or None when outside the layers. The
    folder index is None in a layer without a folder order, and -1 for a folder its order does not
    name."""
    parts = path.split("/")
    if parts[0] == "simt":  # the emulator's include path: common/simt
        parts = ["common"] + parts
    if parts[0] not in layers:
        return None
    layer = layers.index(parts[0])
    folder = None
    order = folders.get(parts[0])
    if order is not None:
        if len(parts) == 2 and "registry" in order:  # a file directly in kernels/: the top
            folder = order.index("registry")
        elif len(parts) > 2 and parts[1] in order:
            folder = order.index(parts[1])
        else:
            folder = -1  # an unknown folder: reported
    return layer, folder


def violations(root):
    layers, folders = read_orders(root)
    found = []
    for layer in layers:
        for directory, _, files in os.walk(os.path.join(root, layer)):
            for name in files:
                if not name.endswith(SOURCE_SUFFIXES):
                    continue
                full = os.path.join(directory, name)
                path = os.path.relpath(full, root).replace(os.sep, "/")
                own = rank_of(path, layers, folders)
                if own[1] == -1:
                    key = FOLDER_ORDERS[layer]
                    where = path.split('/')[1] + "/" if path.count("/") > 1 else "(the layer's top)"
                    found.append(f"{path}: {layer}/{where} is not in the {key} order of kernels/README.md")
                    continue
                text = open(full, encoding="utf-8", errors="replace").read()
                for line_number, included in ((text.count("\n", 0, m.start()) + 1, m.group(1))
                                              for m in INCLUDE.finditer(text)):
                    other = rank_of(included, layers, folders)
                    if other is None:
                        continue
                    if other[0] > own[0]:
                        found.append(f"{path}:{line_number}: includes {included}: layer {layers[other[0]]} is above "
                                     f"{layers[own[0]]} ({' → '.join(layers)})")
                    elif other[0] == own[0] and own[1] is not None and other[1] is not None and other[1] > own[1]:
                        order = folders[layer]
                        found.append(f"{path}:{line_number}: includes {included}: {layer}/{order[other[1]]} is "
                                     f"above {layer}/{order[own[1]]} ({' → '.join(order)})")
    return found


SEQUENCE_DEFINITION = re.compile(r"\b(?:struct|class)[ \t]+Sequence\b[ \t]*(?:final[ \t]*)?[{:]")
ID_KEYED_MAP = re.compile(r"std::(?:unordered_)?map<\s*(?:std::)?(?:int(?:8|16|32|64)_t|int|long|long long)\s*,")
TOKEN_LIST = re.compile(r"std::vector<\s*(?:std::)?int32_t\s*>\s+tokens\w*\s*[;{=]")
THE_SEQUENCE = "runtime/engine/sequence.h"
KV_CACHE_MEMBER = re.compile(r"^[ \t]*(?:std::unique_ptr<\s*)?KvCache\s*>?\s+\w+_\s*[;{=(]", re.MULTILINE)
THE_STORAGE = "kernels/kv/kv_storage.h"
TABLE_OR_LENGTH = re.compile(r"\b(?:block_table|lengths?)\w*_\b")


def source_files(root, top):
    """(repository path, text) of every source file under ROOT/top."""
    for directory, _, files in os.walk(os.path.join(root, top)):
        for name in sorted(files):
            if name.endswith(SOURCE_SUFFIXES):
                full = os.path.join(directory, name)
                yield (os.path.relpath(full, root).replace(os.sep, "/"),
                       open(full, encoding="utf-8", errors="replace").read())


def line_of(text, offset):
    return text.count("\n", 0, offset) + 1


def state_violations(root):
    """The one-sequence rules of the docstring, as messages."""
    found = []
    definitions = [(path, line_of(text, m.start())) for path, text in source_files(root, "runtime")
                   for m in SEQUENCE_DEFINITION.finditer(text)]
    for path, line in definitions:
        if path != THE_SEQUENCE:
            found.append(f"{path}:{line}: defines a Sequence: a request's state is {THE_SEQUENCE}'s, in one place")
    if definitions and not any(path == THE_SEQUENCE for path, _ in definitions):
        found.append(f"{THE_SEQUENCE}: no struct Sequence (the one sequence state)")
    if len([d for d in definitions if d[0] == THE_SEQUENCE]) > 1:
        found.append(f"{THE_SEQUENCE}: defines Sequence more than once")
    for path, text in source_files(root, "runtime/paged"):
        for m in ID_KEYED_MAP.finditer(text):
            found.append(f"{path}:{line_of(text, m.start())}: a map keyed by an id ({m.group(0)}…): per-sequence state "
                         f"belongs in the sequence ({THE_SEQUENCE}), not in runtime/paged")
        for m in TOKEN_LIST.finditer(text):
            found.append(f"{path}:{line_of(text, m.start())}: a token list ({m.group(0).rstrip(';{=').strip()}): "
                         f"a sequence's tokens live in {THE_SEQUENCE} only")
    if os.path.exists(os.path.join(root, "runtime", "paged", "paged_kv.h")):
        found.append("runtime/paged/paged_kv.h: exists again (the model runner applies the step plan to the cache)")
    for path, text in source_files(root, "runtime"):
        for m in KV_CACHE_MEMBER.finditer(text):
            found.append(f"{path}:{line_of(text, m.start())}: keeps a KvCache ({m.group(0).strip()}…): the runtime "
                         f"keeps KV storage, and a step's tables and lengths come from its plan")
    storage = os.path.join(root, THE_STORAGE)
    if os.path.exists(storage):
        text = open(storage, encoding="utf-8").read()
        for m in TABLE_OR_LENGTH.finditer(text):
            found.append(f"{THE_STORAGE}:{line_of(text, m.start())}: holds {m.group(0)}: the storage has no index")
    return found


def write_file(root, path, text):
    """Writes @p text at @p path under the scratch tree @p root, making its folders."""
    os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
    open(os.path.join(root, path), "w", encoding="utf-8").write(text)


def self_test():
    """An upward include in a scratch tree must be reported, and a clean tree must pass."""
    with tempfile.TemporaryDirectory() as root:
        def write(path, text):
            write_file(root, path, text)
        write("kernels/README.md", "    Layers: common → kernels → runtime\n    Folders: kv → decode → registry\n"
                                   "    Runtime: gguf → collective → model → parallel\n")
        write("common/a.h", '#include "simt/simt.h"\n')
        write("kernels/kv/cache.h", '#include "common/a.h"\n')
        write("kernels/decode/decode.h", '#include "kernels/kv/cache.h"\n')
        write("kernels/registry.h", '#include "kernels/decode/decode.h"\n')
        write("runtime/collective/communicator.h", '#include "common/a.h"\n')
        write("runtime/model/model.h", '#include "kernels/registry.h"\n#include "runtime/gguf/gguf.h"\n'
                                       '#include "runtime/collective/communicator.h"\n')
        write("runtime/parallel/split.h", '#include "runtime/model/model.h"\n')
        if violations(root):
            print("self-test: a clean tree was reported:", violations(root))
            return 1
        write("kernels/kv/cache.cpp", '#include "kernels/kv/cache.h"\n\n#include "kernels/decode/decode.h"\n')
        write("common/b.cpp", '#include "runtime/model.h"\n')
        write("runtime/model/model.cpp", '#include "runtime/model/model.h"\n#include "runtime/parallel/split.h"\n')
        write("runtime/analysis/cost.h", '#include "common/a.h"\n')
        found = violations(root)
        expected = ["kernels/kv/cache.cpp:3: includes kernels/decode/decode.h", "common/b.cpp:1: includes runtime/model.h",
                    "runtime/model/model.cpp:2: includes runtime/parallel/split.h: runtime/parallel is above "
                    "runtime/model", "runtime/analysis/cost.h: runtime/analysis/ is not in the Runtime order"]
        missing = [e for e in expected if not any(f.startswith(e) for f in found)]
        if missing or len(found) != len(expected):
            print("self-test: expected", expected, "got", found)
            return 1
    print("self-test: an upward include between kernels/ folders, between runtime/ folders and between layers, and "
          "a runtime/ folder outside its order, are reported")
    return state_self_test()


def state_self_test():
    """Each one-sequence rule must fire on a scratch tree that breaks it, and a clean tree pass."""
    with tempfile.TemporaryDirectory() as root:
        def write(path, text):
            write_file(root, path, text)
        write("runtime/engine/sequence.h", "struct Sequence {\n  std::vector<int32_t> tokens;\n};\n")
        write("runtime/paged/block_manager.h",
              "struct BlockTable { std::vector<int32_t> blocks; };\nstd::unordered_map<uint64_t, int32_t> by_hash;\n"
              "struct SequenceBlocks { int64_t id; };\nstruct Sequence;  // a declaration is no definition\n")
        if state_violations(root):
            print("self-test: a clean tree was reported:", state_violations(root))
            return 1
        write("runtime/paged/manager.h", "class BlockManager {\n  struct Sequence {\n    std::vector<int32_t> tokens;\n"
              "  };\n  std::map<int64_t, Sequence> sequences_;\n};\n")
        write("runtime/paged/paged_kv.h", "inline void apply_prompt() {}\n")
        write("runtime/model/runner.h", "class Runner {\n  KvStorage pool_;\n  KvCache cache_;\n};\n")
        write("kernels/kv/kv_storage.h", "class KvStorage {\n  std::vector<int32_t> block_table_;\n};\n")
        found = state_violations(root)
        expected = ["runtime/paged/manager.h:2: defines a Sequence", "runtime/paged/manager.h:5: a map keyed by an id",
                    "runtime/paged/manager.h:3: a token list", "runtime/paged/paged_kv.h: exists again",
                    "runtime/model/runner.h:3: keeps a KvCache", "kernels/kv/kv_storage.h:2: holds block_table_"]
        missing = [e for e in expected if not any(f.startswith(e) for f in found)]
        if missing or len(found) != len(expected):
            print("self-test: expected", expected, "got", found)
            return 1
    print("self-test: a second Sequence, an id-keyed map or token list in runtime/paged, paged_kv.h, a KvCache kept "
          "in runtime/ and an index in the storage are reported")
    return 0


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "--self-test":
        return self_test()
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    found = violations(sys.argv[1]) + state_violations(sys.argv[1])
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} violation(s) of the include order of kernels/README.md or of the one-sequence rules")
        return 1
    layers, folders = read_orders(sys.argv[1])
    print("every include follows " + " → ".join(layers) + ", kernels/ " + " → ".join(folders["kernels"]) +
          " and runtime/ " + " → ".join(folders["runtime"]) + "; one Sequence state, none in runtime/paged; the runtime keeps KV storage, not a cache")
    return 0


if __name__ == "__main__":
    sys.exit(main())

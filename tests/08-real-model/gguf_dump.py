#!/usr/bin/env python3
"""A GGUF file as PyPI's `gguf.GGUFReader` (llama.cpp's own Python reader) sees it, as JSON: the
independent reader that test_gguf.cpp compares the lab's reader with.

    gguf_dump.py MODEL.gguf OUT.json

OUT.json holds
    version, alignment, data_offset (absolute), file_size,
    metadata: [{key, type, element_type (arrays; else null), value}] in file order, where
        integers and bools are JSON numbers / booleans, strings are the hex of their bytes
        (no encoding assumed), f32 and f64 are their IEEE bit patterns as unsigned integers
        (exact, and NaN-safe), and an array's value is the list of its elements so encoded;
    tensors: [{name, type, ne, offset (from the data section), bytes, sha256}] in file order.
The reader's own pseudo-fields (GGUF.version, GGUF.tensor_count, GGUF.kv_count) are not metadata.
"""
import hashlib
import json
import os
import sys

import numpy as np
from gguf import GGUFReader, GGUFValueType


def encode(part, value_type):
    """One scalar (a numpy array of one element, or a string's bytes) as the JSON above."""
    if value_type == GGUFValueType.STRING:
        return bytes(part).hex()
    if value_type == GGUFValueType.FLOAT32:
        return int(part.view(np.uint32)[0])
    if value_type == GGUFValueType.FLOAT64:
        return int(part.view(np.uint64)[0])
    if value_type == GGUFValueType.BOOL:
        return bool(part[0])
    return int(part[0])


def metadata_entry(field):
    main_type = field.types[0]
    entry = {"key": field.name, "type": int(main_type), "element_type": None}
    if main_type == GGUFValueType.ARRAY:
        if len(field.types) != 2:
            sys.exit(f"{field.name}: nested arrays (types {field.types}) are not GGUF")
        element_type = field.types[1]
        entry["element_type"] = int(element_type)
        entry["value"] = [encode(field.parts[i], element_type) for i in field.data]
    else:
        entry["value"] = encode(field.parts[field.data[0]], main_type)
    return entry


def tensor_entry(reader, tensor):
    data = np.ascontiguousarray(tensor.data).view(np.uint8).reshape(-1)
    if data.size != tensor.n_bytes:
        sys.exit(f"{tensor.name}: {data.size} data bytes, expected {tensor.n_bytes}")
    return {
        "name": tensor.name,
        "type": int(tensor.tensor_type),
        "ne": [int(n) for n in tensor.shape],
        "offset": int(tensor.data_offset - reader.data_offset),
        "bytes": int(tensor.n_bytes),
        "sha256": hashlib.sha256(data.tobytes()).hexdigest(),
    }


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: gguf_dump.py MODEL.gguf OUT.json")
    path, out = sys.argv[1], sys.argv[2]
    reader = GGUFReader(path, "r")
    dump = {
        "version": int(reader.fields["GGUF.version"].parts[0][0]),
        "alignment": int(reader.alignment),
        "data_offset": int(reader.data_offset),
        "file_size": os.path.getsize(path),
        "metadata": [metadata_entry(f) for name, f in reader.fields.items() if not name.startswith("GGUF.")],
        "tensors": [tensor_entry(reader, t) for t in reader.tensors],
    }
    with open(out, "w", encoding="utf-8") as f:
        json.dump(dump, f)


if __name__ == "__main__":
    main()

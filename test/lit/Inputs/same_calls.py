"""``same_calls.py PREFIX LLIR_FILE AMDGCN_FILE``: every function whose name starts with PREFIX that the LLVM IR calls
is called in the AMDGCN assembled from it (through its GOT entry, ``NAME@gotpcrel32@lo``, as a function that no
library resolved is called), and no other; at least one. Prints the difference and exits 1 otherwise."""
import re
import sys

prefix, llir_path, gcn_path = sys.argv[1:4]
with open(llir_path) as f:
    llir = set(re.findall(r"\bcall [^@\n]*@(" + re.escape(prefix) + r"\w*)\(", f.read()))
with open(gcn_path) as f:
    gcn = set(re.findall(r"\b(" + re.escape(prefix) + r"\w*)@gotpcrel32@lo", f.read()))
if not llir or llir != gcn:
    print(f"LLVM IR calls {len(llir)} {prefix}* functions; AMDGCN calls {len(gcn)}", file=sys.stderr)
    print(f"only in LLVM IR: {sorted(llir - gcn)}\nonly in AMDGCN: {sorted(gcn - llir)}", file=sys.stderr)
    sys.exit(1)
print(f"{len(gcn)} {prefix}* functions called in both")

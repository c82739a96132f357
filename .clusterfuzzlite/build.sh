#!/bin/bash -eu
# Builds one fuzzer per target in fuzz/targets/ for ClusterFuzzLite/OSS-Fuzz.
#
# Each fuzzer is the target script packaged by compile_python_fuzzer (pyinstaller), named
# nnfuzz_<target>, with its seed corpus (corpus/<target> -> <name>_seed_corpus.zip), the
# dictionary (fuzz/nnapi.dict -> <name>.dict) and the campaign limits the project uses
# (<name>.options: rss_limit_mb=2048, timeout=5, max_len from the target).
pip3 install .

for target in model request execute cache memory; do
  name="nnfuzz_${target}"
  # compile_python_fuzzer names the fuzzer after the script, so give it a unique name.
  cp "fuzz/targets/${target}.py" "${name}.py"
  compile_python_fuzzer "${name}.py" \
    --collect-submodules driver --collect-submodules randomgraph --collect-submodules fuzz
  rm "${name}.py"
  (cd "corpus/${target}" && zip -q -r "${OUT}/${name}_seed_corpus.zip" .)
  cp fuzz/nnapi.dict "${OUT}/${name}.dict"
  max_len=$(python3 -c "from fuzz.targets import load; print(load('${target}').MAX_LEN)")
  cat > "${OUT}/${name}.options" <<OPTIONS
[libfuzzer]
rss_limit_mb = 2048
timeout = 5
max_len = ${max_len}
OPTIONS
done

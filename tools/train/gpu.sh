#!/bin/bash
# On the GPU host, from the repository root, with .carry/corpus (corpus.py)
# and .carry/ringlm (go build) carried: train the default model and write
# its GGUFs with ringlm's own writer into $OUT.
set -o pipefail
export PYTHONUNBUFFERED=1
T0=$(date +%s)
python3 tools/train/train.py --corpus .carry/corpus --out /tmp/gocoder --minutes ${MINUTES:-6.5} 2>&1 | tee $OUT/train.log || exit 1
for t in f16 q8_0; do .carry/ringlm synth --preset gocoder --tokenizer /tmp/gocoder/tokenizer.json --weights /tmp/gocoder/model.safetensors --type $t -o $OUT/gocoder-$t.gguf || exit 1; done
cp /tmp/gocoder/tokenizer.json /tmp/gocoder/tokenizer_config.json /tmp/gocoder/train.json $OUT/
printf 'package main\n\nimport (\n\t"fmt"\n\t"os"\n)\n\nfunc main() {\n' > /tmp/prompt.txt
.carry/ringlm run -m $OUT/gocoder-q8_0.gguf -p "$(cat /tmp/prompt.txt)" -n 64 --device cpu --temp 0 2>&1 | tail -20
echo "total $(( $(date +%s) - T0 ))s"

#!/usr/bin/env bash
# train_resume.sh TRAIN DIR - examples/train resumed from a checkpoint ends where an unbroken run ends: 20 steps in one
# run, and 10 steps then 10 more resumed from the first 10's checkpoint, write checkpoints equal byte for byte (the
# step counter, every weight, AdamW's moments, step counts and words). A checkpoint of another model's shape is refused
# with a message. The three runs share one autotune cache (GG_TUNE_CACHE), so that their GEMMs are the same. Exit 77
# without a GPU (train's own).
set -u
train=$1 dir=$2
mkdir -p "$dir"
rm -f "$dir"/*.ckpt "$dir/gemm-algos.txt"
export GG_TUNE_CACHE="$dir/gemm-algos.txt"
args=(--batch 256 --context 8 --embed 16 --layers 4 --log-every 10 --warmup 0)
"$train" "${args[@]}" --steps 20 --save "$dir/whole.ckpt"
rc=$?
[ $rc = 77 ] && exit 77
[ $rc = 0 ] || { echo "train_resume: the 20-step run failed"; exit 1; }
# checkpoints at step 5 and at the end, the second replacing the first
"$train" "${args[@]}" --steps 10 --save "$dir/half.ckpt" --save-every 5 ||
  { echo "train_resume: the 10-step run failed"; exit 1; }
"$train" "${args[@]}" --steps 20 --resume "$dir/half.ckpt" --save "$dir/resumed.ckpt" ||
  { echo "train_resume: the resumed run failed"; exit 1; }
cmp "$dir/whole.ckpt" "$dir/resumed.ckpt" ||
  { echo "train_resume: FAILED: the resumed run's checkpoint differs from the unbroken run's"; exit 1; }
if "$train" "${args[@]}" --embed 8 --steps 20 --resume "$dir/half.ckpt" 2> "$dir/refused.txt"; then
  echo "train_resume: FAILED: a checkpoint of another shape was loaded"
  exit 1
fi
grep -q "another model" "$dir/refused.txt" || { echo "train_resume: FAILED: no message:"; cat "$dir/refused.txt"; exit 1; }
echo "train_resume: 10 + 10 steps resumed equal 20 steps, $(stat -c %s "$dir/whole.ckpt") bytes byte for byte;" \
  "another shape refused: $(head -1 "$dir/refused.txt")"

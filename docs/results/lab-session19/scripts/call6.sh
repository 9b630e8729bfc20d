#!/usr/bin/env bash
# session 19 call 6: one stream (--overlap never) against two (auto) under the timing protocol, blocks 4 (3 rounds), 2, 3
set -uo pipefail
A=/tmp/ab6; mkdir -p $A/out
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
bash scripts/device.sh build > $A/out/build.log 2>&1 || tail -20 $A/out/build.log
B=build-device/bench/gg_bench
for r in 1 2 3; do for ov in auto never; do
  GG_TUNE_CACHE=$A/algos.txt $B --block 4 --modes fast --iters 50 --warmup 10 --overlap $ov --csv $A/$ov-r$r-b4.csv > /dev/null 2>> $A/$ov-r$r.log
done; done
for ov in auto never; do for b in 2 3; do
  GG_TUNE_CACHE=$A/algos.txt $B --block $b --modes fast --iters 30 --warmup 10 --overlap $ov --csv $A/$ov-r1-b$b.csv > /dev/null 2>> $A/$ov-r1.log
done; done
python3 scripts/lab/ab_summary.py $A > $A/out/ab6-summary.txt 2>&1
python3 - $A > $A/out/events.txt <<'PY'
import csv, glob, sys, statistics, math
A = sys.argv[1]
for b in (4, 2, 3):
    rows = {}
    for ov in ("auto", "never"):
        for p in sorted(glob.glob(f"{A}/{ov}-r*-b{b}.csv")):
            for r in csv.DictReader(open(p)):
                rows.setdefault((ov, int(r["index"])), []).append((float(r["graph_us"]), float(r["graph_span_us"]), int(r["M"])))
    print(f"== block {b}: per case median of rounds, events (graph_us) and spans, auto vs never")
    ge = {"auto": [], "never": []}
    for i in range(16):
        line = []
        for ov in ("auto", "never"):
            v = rows[(ov, i)]
            ev, sp = statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)
            ge[ov].append(ev); line.append(f"{ov} ev {ev:8.2f} span {sp:8.2f}")
        print(f"{i:3d} M={v[0][2]:6d} " + " | ".join(line))
    g = {k: math.exp(sum(map(math.log, x)) / 16) for k, x in ge.items()}
    print("events geomean", g)
PY
cat $A/out/ab6-summary.txt $A/out/events.txt | head -90
(cd $A && tar czf out/ab6-csv.tgz *.csv *.log 2>/dev/null)
tar czf $OUT/call6.tgz -C $A out

#!/usr/bin/env python3
"""A model check of kernels/ssm_fused.cu's synchronization, run on the CPU (a ctest: tests/CMakeLists.txt).

The kernel's actors (the ring producer, the epilogue-buffer producer, two consumer warpgroups, with --bias the bias
warps, and the TMA unit that lands copies later) are generators over mbarriers with PTX's semantics: arrivals and
transaction bytes complete a phase; try_wait.parity(P) succeeds once the phase with parity P has completed, i.e.
when P differs from the parity of the barrier's current (incomplete) phase. A random scheduler interleaves them;
copies land at random later steps. Every read checks that the ring stage or the buffer holds the tile and k-tile it
expects, and every landing that nobody still needs what it overwrites. With --bias it models the warps that sum the
bias rows, with --halves the epilogue buffer in two halves with barriers of their own (the kernel has both); with
--cluster 2 the 2-CTA variant (W's boxes multicast, stages released on both CTAs' barriers) kept on the lab branch
wip/ssm-fused-v2. Exit status 0 when the outcome is the expected one: no stale read with the mainloop_done and
epi_empty order waits, and, with --no-order (the control: the waits removed), stale reads found, which shows the
check can fail.
    python3 tests/model/fused_protocol_sim.py [--seeds N] [--no-order] [--cluster 2] [--bias] [--halves]"""
import random
import sys


class Barrier:
    def __init__(self, count):
        self.count, self.pending, self.tx, self.completed = count, count, 0, 0

    def _maybe_complete(self):
        if self.pending == 0 and self.tx == 0:
            self.completed += 1
            self.pending = self.count

    def arrive(self):
        self.pending -= 1
        assert self.pending >= 0, "more arrivals than the count"
        self._maybe_complete()

    def expect_tx(self, n):  # mbarrier.arrive.expect_tx: adds the bytes, then arrives
        self.tx += n
        self.arrive()

    def complete_tx(self, n):
        self.tx -= n
        self._maybe_complete()

    def test(self, parity):
        return parity != (self.completed & 1)


class Sim:
    """One cluster of `cluster` CTAs (1: the kernel's default; 2: GG_LAB_FUSED_CLUSTER, W's boxes shared by
    multicast). Each CTA: a ring producer, an epilogue-buffer producer, two consumer warpgroups and, with `bias`, the
    two warps that sum the bias rows (they wait on every stage and release it too). A stage of CTA c holds its own
    dY box and one W box from each CTA of the cluster; a consumer releases a stage on the empty barriers of every
    CTA (each CTA's W box is in it), the bias warps on their own CTA's only (they read only its dY box)."""

    def __init__(self, seed, tiles, k_tiles, stages, order, cluster=1, bias=False, parts=1):
        self.rng = random.Random(seed)
        self.tiles, self.k_tiles, self.stages, self.order = tiles, k_tiles, stages, order
        self.cluster, self.bias, self.parts = cluster, bias, parts  # parts: the epilogue buffer's (halves: 2)
        C = range(cluster)
        self.full = [[Barrier(1) for _ in range(stages)] for _ in C]
        # one arrival per consuming warpgroup of each CTA (the kernel: per thread, or per warp in clusters), and
        # one for the bias warps of this CTA
        self.empty = [[Barrier(cluster + (1 if bias else 0)) for _ in range(stages)] for _ in C]
        self.epi_full = [[Barrier(1) for _ in range(parts)] for _ in C]
        self.epi_empty = [[Barrier(1) for _ in range(parts)] for _ in C]
        self.mainloop_done = [Barrier(1) for _ in C]
        self.dy = [[None] * stages for _ in C]  # label of a stage's dY box: (tile, k-tile)
        self.w = [[[None] * cluster for _ in range(stages)] for _ in C]  # its W boxes, one per CTA that loads
        self.epi = [[None] * parts for _ in C]  # label of each part of the buffer: tile
        self.in_flight = []  # copies issued, not landed: (kind, cta, slot, part, label, barrier)
        self.errors = []

    def tma(self, kind, cta, slot, part, label, bar):
        self.in_flight.append((kind, cta, slot, part, label, bar))

    def land(self, i):
        kind, c, slot, part, label, bar = self.in_flight.pop(i)
        if kind == "dy":
            self.dy[c][slot] = label
        elif kind == "w":
            self.w[c][slot][part] = label
        else:
            self.epi[c][slot] = label
        bar.complete_tx(1)

    def holds(self, c, s, label, with_w=True):
        return self.dy[c][s] == label and (not with_w or all(x == label for x in self.w[c][s]))

    # actors: generators yielding a predicate to wait for (None: just a step)
    def ring_producer(self, c):
        q = 0
        for j in range(self.tiles):
            for kt in range(self.k_tiles):
                s = q % self.stages
                if q >= self.stages:
                    p = (q // self.stages - 1) & 1
                    yield lambda s=s, p=p: self.empty[c][s].test(p)
                self.full[c][s].expect_tx(1 + self.cluster)  # its dY box and one W box from each CTA
                self.tma("dy", c, s, 0, (j, kt), self.full[c][s])
                for d in range(self.cluster):  # its W box into every CTA (multicast), completing on theirs
                    self.tma("w", d, s, c, (j, kt), self.full[d][s])
                q += 1
                yield None

    def epi_producer(self, c):
        for j in range(self.tiles):
            for h in range(self.parts):
                if j >= 1:
                    p = (j - 1) & 1
                    yield lambda p=p, h=h: self.epi_empty[c][h].test(p)
                self.epi_full[c][h].expect_tx(1)
                self.tma("epi", c, h, 0, j, self.epi_full[c][h])
                yield None

    def bias_warps(self, c):
        q = 0
        for j in range(self.tiles):
            for kt in range(self.k_tiles):
                s, p = q % self.stages, (q // self.stages) & 1
                yield lambda s=s, p=p: self.full[c][s].test(p)
                if self.dy[c][s] != (j, kt):
                    self.errors.append(f"CTA {c} bias warps read stage {s} holding {self.dy[c][s]}, wanted {(j, kt)}")
                yield None  # summing
                if self.dy[c][s] != (j, kt):
                    self.errors.append(f"CTA {c}: stage {s} overwritten under the bias warps")
                self.empty[c][s].arrive()
                q += 1

    def release(self, c, s, label, wg):
        if not self.holds(c, s, label):
            self.errors.append(f"CTA {c} warpgroup {wg}: stage {s} overwritten while its wgmmas read {label}")
        for d in range(self.cluster):
            self.empty[d][s].arrive()

    def consumer(self, c, wg):
        for j in range(wg, self.tiles, 2):
            if self.order and j >= 1:
                p = (j - 1) & 1
                yield lambda p=p: self.mainloop_done[c].test(p)
            prev = None
            for kt in range(self.k_tiles):
                q = j * self.k_tiles + kt
                s, p = q % self.stages, (q // self.stages) & 1
                yield lambda s=s, p=p: self.full[c][s].test(p)
                if not self.holds(c, s, (j, kt)):
                    self.errors.append(f"CTA {c} warpgroup {wg} read stage {s} holding {self.dy[c][s]} / "
                                       f"{self.w[c][s]}, wanted {(j, kt)}")
                if prev is not None:  # wgmma.wait_group 1: the previous k-tile's group is done
                    self.release(c, prev[0], prev[1], wg)
                prev = (s, (j, kt))
                yield None
            self.release(c, prev[0], prev[1], wg)  # wait_group 0
            self.mainloop_done[c].arrive()
            for h in range(self.parts):
                if self.order and j >= 1:
                    p = (j - 1) & 1
                    yield lambda p=p, h=h: self.epi_empty[c][h].test(p)
                p = j & 1
                yield lambda p=p, h=h: self.epi_full[c][h].test(p)
                if self.epi[c][h] != j:
                    self.errors.append(f"CTA {c} warpgroup {wg} read part {h} of the buffer holding tile "
                                       f"{self.epi[c][h]}, wanted {j}")
                yield None
                if self.epi[c][h] != j:
                    self.errors.append(f"CTA {c} warpgroup {wg}: part {h} changed under tile {j}'s epilogue")
                self.epi_empty[c][h].arrive()

    def run(self):
        actors = []
        for c in range(self.cluster):
            actors += [self.ring_producer(c), self.epi_producer(c), self.consumer(c, 0), self.consumer(c, 1)]
            if self.bias:
                actors.append(self.bias_warps(c))
        waiting = [None] * len(actors)
        done = [False] * len(actors)
        for _ in range(400000):
            runnable = [i for i in range(len(actors)) if not done[i] and (waiting[i] is None or waiting[i]())]
            choices = runnable + (["land"] if self.in_flight else [])
            if not choices:
                if all(done):
                    return self.errors
                self.errors.append("deadlock")
                return self.errors
            c = self.rng.choice(choices)
            if c == "land":
                self.land(self.rng.randrange(len(self.in_flight)))
                continue
            try:
                waiting[c] = next(actors[c])
            except StopIteration:
                done[c] = True
                if all(done) and self.in_flight:  # the cluster's exit barrier: nothing may land after it
                    self.errors.append(f"{len(self.in_flight)} copies still in flight at the exit")
            except AssertionError as e:  # a barrier's phase over-arrived: a protocol error too
                self.errors.append(str(e))
                return self.errors
        self.errors.append("did not finish")
        return self.errors


def main():
    seeds = int(sys.argv[sys.argv.index("--seeds") + 1]) if "--seeds" in sys.argv else 2000
    order = "--no-order" not in sys.argv
    cluster = int(sys.argv[sys.argv.index("--cluster") + 1]) if "--cluster" in sys.argv else 1
    bias = "--bias" in sys.argv
    parts = 2 if "--halves" in sys.argv else 1
    failures = 0
    for seed in range(seeds):
        rng = random.Random(seed)
        tiles, k_tiles, stages = rng.randint(1, 9), rng.randint(1, 13), rng.randint(2, 5)
        errors = Sim(seed, tiles, k_tiles, stages, order, cluster, bias, parts).run()
        if errors:
            failures += 1
            if failures <= 3:
                print(f"seed {seed} (tiles {tiles}, k-tiles {k_tiles}, stages {stages}): {errors[0]}")
    print(f"{seeds} schedules, cluster {cluster}, bias warps {'on' if bias else 'off'}, buffer in {parts} part(s): "
          f"{failures} failed "
          f"({'with' if order else 'without'} the order waits)")
    return (1 if failures else 0) if order else (0 if failures else 1)


if __name__ == "__main__":
    sys.exit(main())

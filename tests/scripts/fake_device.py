"""fake_device.py - scripts/device.sh run end to end on a machine without GPUs, for the script tests of its stages
(test_device_tests.py, test_device_multigpu.py): a scratch copy of the scripts, of the files a test names and of the
official JSON, cmocka's header where device.sh looks for it, nvidia-smi (FAKE_GPUS H200s) and cmake faked on PATH with
whatever tools the test adds, and programs faked in the build folder. Every fake may append what it was asked to
$FAKE_LOG, which stage() returns."""
import os
import shutil
import stat
import subprocess
import tarfile

FAKES = {
    "nvidia-smi": 'if [ "$1" = -L ]; then for i in $(seq 1 "$FAKE_GPUS"); do echo "GPU $i: NVIDIA H200"; done\n'
                  'exit 0; fi\n'
                  'echo "name, driver_version"; for i in $(seq 1 "$FAKE_GPUS"); do echo "NVIDIA H200, 580"; done\n',
    "cmake": 'echo "cmake $*" >> "$FAKE_LOG"\ncase "$*" in *"--target help"*) echo "test_dist_mpi: phony";; esac\n',
}


def script(path, text):
    """An executable bash script at path."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("#!/bin/bash\n" + text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def archived_log(out, stage, name):
    """The text of the file `name` in a stage's log archive, out/logs-<stage>.tgz ("" when either is missing)."""
    path = os.path.join(out, f"logs-{stage}.tgz")
    if not os.path.exists(path):
        return ""
    with tarfile.open(path) as t:
        member = next((m for m in t.getmembers() if m.name.endswith(name)), None)
        return t.extractfile(member).read().decode() if member else ""


class Machine:
    """The scratch tree under d (d/tree) and its tools (d/bin): `copies` are paths below root copied into the tree,
    `tools` maps a tool's name to its bash body (over FAKES'), `programs` a path below build-device to its body."""

    def __init__(self, root, d, copies=(), tools=None, programs=None):
        self.d, self.tree, self.bin = d, os.path.join(d, "tree"), os.path.join(d, "bin")
        shutil.copytree(os.path.join(root, "scripts"), os.path.join(self.tree, "scripts"))
        for rel in ("docs/results/reliability-h200.json", "docs/results/step-h200.json") + tuple(copies):
            os.makedirs(os.path.dirname(os.path.join(self.tree, rel)), exist_ok=True)
            shutil.copy(os.path.join(root, rel), os.path.join(self.tree, rel))
        os.makedirs(os.path.join(self.tree, "carry", "cmocka", "usr", "include"))
        open(os.path.join(self.tree, "carry", "cmocka", "usr", "include", "cmocka.h"), "w").close()
        for name, text in dict(FAKES, **(tools or {})).items():
            script(os.path.join(self.bin, name), text)
        for rel, text in (programs or {}).items():
            script(os.path.join(self.tree, "build-device", rel), text)

    def stage(self, name, out, gpus, **env):
        """device.sh's stage `name` into OUT=out with `gpus` fake GPUs and env (GG_COMMIT abc1234 unless it says
        otherwise): (exit status, its output, the calls the fakes logged, those of earlier stages into the same out
        included)."""
        log = os.path.join(self.d, f"calls-{os.path.basename(out)}.log")
        e = dict(os.environ, GG_COMMIT="abc1234")
        e.update(PATH=self.bin + os.pathsep + os.environ["PATH"], FAKE_GPUS=str(gpus), FAKE_LOG=log, OUT=out, **env)
        p = subprocess.run(["bash", os.path.join(self.tree, "scripts", "device.sh"), name], capture_output=True,
                           text=True, env=e, timeout=120)
        return p.returncode, p.stdout + p.stderr, open(log).read() if os.path.exists(log) else ""

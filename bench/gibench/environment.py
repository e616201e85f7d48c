"""What a result was measured on: machine, versions, settings (written beside results)."""
import os
import platform
import subprocess

from .paths import ROOT


def _run(cmd):
    try:
        return subprocess.run(cmd, text=True, capture_output=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def time_now():
    import time
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def describe(conn, cluster):
    import numpy
    info = {
        "cpu": f"{cpu_model()} x {os.cpu_count()}",
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30),
        "os": _run(["sh", "-c", ". /etc/os-release && echo $PRETTY_NAME"]),
        "postgres": conn.execute("SELECT version()").fetchone()[0].split(" on ")[0],
        "gpuindex_commit": os.environ.get("BENCH_COMMIT")
        or _run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"]),
        "python": platform.python_version(),
        "numpy": numpy.__version__,
    }
    for ext in ("vector", "gpuindex"):
        v = conn.execute("SELECT extversion FROM pg_extension WHERE extname = %s",
                         (ext,)).fetchone()
        info[f"ext_{ext}"] = v[0] if v else "not installed"
    try:
        import faiss
        info["faiss"] = faiss.__version__
    except ImportError:
        info["faiss"] = "not installed"
    try:
        row = conn.execute("SELECT backend, device FROM gpuindex_service()").fetchone()
        info["gpuindex_backend"] = f"{row[0]} ({row[1]})"
    except Exception:
        info["gpuindex_backend"] = "unavailable"
    libdir = _run([os.environ.get("PG_CONFIG", "pg_config"), "--pkglibdir"])
    so = os.path.join(libdir, "gpuindex.so")
    if os.path.exists(so):
        import hashlib
        import time
        digest = hashlib.sha1(open(so, "rb").read()).hexdigest()[:12]
        when = time.strftime("%Y-%m-%d %H:%M", time.gmtime(os.path.getmtime(so)))
        info["gpuindex_so"] = f"sha1 {digest}, installed {when} UTC"
    info["date"] = time_now()
    gpu = _run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"])
    info["gpu"] = gpu or "none"
    info["settings"] = ", ".join(f"{k}={v}" for k, v in cluster.conf.items())
    return info

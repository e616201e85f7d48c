"""Real 128-d SIFT descriptors without a download: OpenCV's SIFT (opencv-python-headless)
on the photographs bundled with scikit-image, each at three scales, shuffled with a fixed
seed into queries and base rows (disjoint).  SIFT1M's vectors are descriptors of the same
kind; this set is smaller and comes from nine images."""
import numpy as np

# the bundled 8-bit photographs (scikit-image 0.26 ships them in the wheel)
IMAGES = ["astronaut", "camera", "coffee", "chelsea", "coins", "moon", "page", "text", "rocket"]
SCALES = (1.0, 1.5, 2.0)


def descriptors():
    try:
        import cv2
        import skimage.data
    except ImportError as e:
        raise SystemExit(f"sift-images needs opencv-python-headless and scikit-image "
                         f"(bench/requirements-genie.txt): {e}")
    sift = cv2.SIFT_create(contrastThreshold=0.01)
    out = []
    for name in IMAGES:
        im = np.asarray(getattr(skimage.data, name)())
        if im.ndim == 3:
            im = cv2.cvtColor(np.ascontiguousarray(im[..., :3]), cv2.COLOR_RGB2GRAY)
        for sc in SCALES:
            x = im if sc == 1.0 else cv2.resize(im, None, fx=sc, fy=sc,
                                                interpolation=cv2.INTER_LINEAR)
            _, d = sift.detectAndCompute(x, None)
            if d is not None:
                out.append(d.astype(np.float32))
    return np.concatenate(out)


def build(n=None, nq=1000, seed=11):
    """(base, queries, info): n base rows (all but the queries when None)."""
    d = descriptors()
    rng = np.random.default_rng(seed)
    d = d[rng.permutation(len(d))]
    if n is None:
        n = len(d) - nq
    if n + nq > len(d):
        raise SystemExit(f"sift-images: {len(d)} descriptors, fewer than {n} + {nq}")
    info = {"kind": "sift-images", "images": IMAGES, "scales": list(SCALES),
            "descriptors": int(len(d)), "detector": "cv2.SIFT_create(contrastThreshold=0.01)",
            "seed": seed}
    return d[nq:nq + n], d[:nq], info

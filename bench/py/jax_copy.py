"""jax_copy: JAX's jax.device_put(numpy array) onto the GPU and np.asarray
(device array) back, of a large uint8 array. np.asarray keeps the host copy
it made of an array, so each readback is of a fresh device array, copied on
the GPU before the clock starts. --pinned: the source is an array in JAX's
pinned host memory (memory kind "pinned_host"), and the readback is a
device_put into that memory kind."""
from pyworkload import Report, copy_args, mismatch, skip

try:
    import jax
    import jax.numpy as jnp
    import numpy as np
except ImportError:
    skip("jax_copy", "no jax")


def main():
    a = copy_args()
    try:
        dev = jax.devices("gpu")[0]
    except RuntimeError as e:  # no CUDA backend, no device
        skip("jax_copy", "jax has no GPU: %s" % e)
    on_gpu = jax.sharding.SingleDeviceSharding(dev)

    rng = np.random.default_rng()
    host = rng.integers(0, 256, a.bytes, dtype=np.uint8)
    src, pinned = host, None
    if a.pinned:
        try:
            pinned = jax.sharding.SingleDeviceSharding(dev, memory_kind="pinned_host")
            src = jax.device_put(host, pinned).block_until_ready()
        except (TypeError, ValueError, RuntimeError) as e:  # a jax or backend without the memory kind
            skip("jax_copy", "no pinned_host memory: %s" % e)
    rep = Report("jax_copy", a.pinned, {"bytes": a.bytes, "reps": a.reps, "jax": jax.__version__})

    def none():
        pass

    d = rep.time_copy("device_put", "H2D", a.bytes, a.reps,
                      lambda: jax.device_put(src, on_gpu).block_until_ready(), none)
    # uint32 sums wrap alike in numpy and in XLA
    if int(jnp.sum(d, dtype=jnp.uint32)) != int(host.sum(dtype=np.uint32)) or \
            not np.array_equal(np.asarray(d[::4099]), host[::4099]):
        mismatch("jax_copy: device_put differs from the source")

    fresh = [jnp.copy(d) for _ in range(a.reps + 1)]  # one warm-up, then the reps
    jax.block_until_ready(fresh)
    if pinned is not None:
        h = rep.time_copy("to_host", "D2H", a.bytes, a.reps,
                          lambda: jax.device_put(fresh.pop(), pinned).block_until_ready(), none)
        h = np.asarray(h)
    else:
        h = rep.time_copy("to_host", "D2H", a.bytes, a.reps, lambda: np.asarray(fresh.pop()), none)
    if not np.array_equal(h, host):
        mismatch("jax_copy: the readback differs from the source")
    rep.print()


if __name__ == "__main__":
    main()

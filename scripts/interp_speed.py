# The microbenchmarks of scripts/interp_speed.tl in CPython, the same way:
# each timed 5 times in one process, medians printed in seconds.
#
#   python3 scripts/interp_speed.py
import time


def sum_loop(n):
    s = 0
    for i in range(n):
        s += i
    return s


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def push_loop(n):
    xs = []
    for i in range(n):
        xs.append(i)
    return len(xs)


def time_one(which):
    started = time.perf_counter()
    if which == 0:
        assert sum_loop(1000000) == 499999500000
    elif which == 1:
        assert fib(30) == 832040
    else:
        assert push_loop(1000000) == 1000000
    return time.perf_counter() - started


names = ["for i in range(1000000): s += i", "fib(30)", "1M append"]
for which in range(3):
    times = sorted(time_one(which) for _ in range(5))
    print(f"{names[which]}: {times[len(times) // 2]:.3f} s")

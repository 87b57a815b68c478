#!/usr/bin/env python3
"""The index maps of moeo_kernel's tensor-core consumers (cuda_moeo.cu, DSINFER_CUDA_MOEO_TC), checked without a GPU.

A pure-Python model of mma.sync.m16n8k16's fragment layout (PTX ISA, .f16 / .bf16 with fp32 C: lane = 4g + t;
a0 = A[g][2t..2t+1], a1 = A[g+8][2t..], a2 = A[g][2t+8..], a3 = A[g+8][2t+8..]; b0 = B[2t..2t+1][g], b1 = B[2t+8..][g];
c0, c1 = C[g][2t], C[g][2t+1]; c2, c3 = C[g+8][2t], C[g+8][2t+1]) and of ldmatrix.x4 (lane 8m + r gives row r of
matrix m; lane 4g + t receives row g's 32-bit word t) feeds the four consumers' lane -> fragment maps with small
integer rows and random x parts and compares each row's result with a plain dot product. Run: python3
dev/cuda/tc_fragments.py (prints four "ok" lines or stops at the first wrong row). A model, not the kernel: the op test
moeotc checks the kernel on the GPU.
"""
import random

Z = [0.0, 0.0]


def mma(c, af, bf):
    """c[lane] += the lanes' A (16 x 16) times B (16 x 8), per the fragment layout above"""
    A = [[0.0] * 16 for _ in range(16)]
    B = [[0.0] * 8 for _ in range(16)]
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        a0, a1, a2, a3 = af[lane]
        A[g][2 * t:2 * t + 2] = a0
        A[g + 8][2 * t:2 * t + 2] = a1
        A[g][2 * t + 8:2 * t + 10] = a2
        A[g + 8][2 * t + 8:2 * t + 10] = a3
        b0, b1 = bf[lane]
        B[2 * t][g], B[2 * t + 1][g] = b0
        B[2 * t + 8][g], B[2 * t + 9][g] = b1
    C = [[sum(A[i][k] * B[k][n] for k in range(16)) for n in range(8)] for i in range(16)]
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for i, v in enumerate([C[g][2 * t], C[g][2 * t + 1], C[g + 8][2 * t], C[g + 8][2 * t + 1]]):
            c[lane][i] += v


def ints(n, m):
    return [[float(random.randint(-8, 7)) for _ in range(m)] for _ in range(n)]


def gauss(n, s):
    return [random.gauss(0, s) for _ in range(n)]


def check(name, got, ref):
    for row, v in got.items():
        assert abs(v - ref[row]) < 1e-9, (name, row, v, ref[row])
    assert sorted(got) == list(range(len(ref))), (name, "rows missing")
    print(name, "ok")


def fp8_gate_up():
    """mo_rows_tc: 16 rows, 64-column groups; lane (g, t) 16 bytes of rows g, g + 8 at 64q + 16t; word j -> MMA j"""
    ncol = 256
    W, xh, xl = ints(16, ncol), gauss(ncol, 1), gauss(ncol, 1e-3)
    r = [[0.0, 0.0] for _ in range(32)]
    for q in range(ncol // 64):
        c = [[0.0] * 4 for _ in range(32)]
        for j in range(4):
            af, bf = [], []
            for lane in range(32):
                g, t = lane >> 2, lane & 3
                base = 64 * q + 16 * t + 4 * j
                rg, rg8 = W[g][base:base + 4], W[g + 8][base:base + 4]
                af.append((rg[0:2], rg8[0:2], rg[2:4], rg8[2:4]))
                xb = xl if g & 1 else xh
                bf.append((xb[base:base + 2], xb[base + 2:base + 4]) if g < 2 else (Z, Z))
            mma(c, af, bf)
        for lane in range(32):
            r[lane][0] += c[lane][0] + c[lane][1]
            r[lane][1] += c[lane][2] + c[lane][3]
    ref = [sum(W[i][k] * (xh[k] + xl[k]) for k in range(ncol)) for i in range(16)]
    got = {}
    for lane in range(0, 32, 4):
        got[lane >> 2], got[(lane >> 2) + 8] = r[lane]
    check("fp8 gate / up", got, ref)


def fp8_down():
    """mo_down_tc: a 64-row group, two ldmatrix.x4, MMA v's B in columns 2v, 2v + 1; lane t holds MMA t's rows"""
    S, ivh, ivl = ints(64, 16), gauss(16, 1), gauss(16, 1e-3)
    c = [[0.0] * 4 for _ in range(32)]
    for hv in range(2):
        m = [[S[32 * hv + 8 * mm + (lane >> 2)][4 * (lane & 3):4 * (lane & 3) + 4] for mm in range(4)] for lane in range(32)]
        for k in range(2):
            af, bf = [], []
            for lane in range(32):
                g, t = lane >> 2, lane & 3
                ra, rb = m[lane][2 * k], m[lane][2 * k + 1]
                af.append((ra[0:2], rb[0:2], ra[2:4], rb[2:4]))
                bv = (ivl if g & 1 else ivh)[4 * t:4 * t + 4]
                bf.append((bv[0:2], bv[2:4]) if (g >> 1) == 2 * hv + k else (Z, Z))
            mma(c, af, bf)
    ref = [sum(S[i][k] * (ivh[k] + ivl[k]) for k in range(16)) for i in range(64)]
    got = {}
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for h in range(2):
            got[16 * t + g + 8 * h] = c[lane][2 * h] + c[lane][2 * h + 1]   # mo_tc_row
    check("fp8 down", got, ref)


def bf16_gate_up():
    """mo_rows_tcb: 8 rows (A rows 8 .. 15 zero), 32-column groups, x's three parts in B's columns 0 .. 2"""
    ncol = 128
    W, xp = ints(8, ncol), [gauss(ncol, 1), gauss(ncol, 1e-3), gauss(ncol, 1e-6)]
    c = [[0.0] * 4 for _ in range(32)]
    for q in range(ncol // 32):
        for jj in range(2):
            af, bf = [], []
            for lane in range(32):
                g, t = lane >> 2, lane & 3
                base = 32 * q + 8 * t + 4 * jj
                row = W[g][base:base + 4]
                af.append((row[0:2], Z, row[2:4], Z))
                bf.append((xp[g][base:base + 2], xp[g][base + 2:base + 4]) if g < 3 else (Z, Z))
            mma(c, af, bf)
    r = [c[lane][0] + c[lane][1] for lane in range(32)]
    r = [r[lane] + (r[lane + 1] if lane < 31 else r[lane]) for lane in range(32)]   # shfl_down 1
    ref = [sum(W[i][k] * sum(p[k] for p in xp) for k in range(ncol)) for i in range(8)]
    check("bf16 gate / up", {g: r[4 * g] for g in range(8)}, ref)


def bf16_down():
    """mo_down_tcb: 8 values a strip row (a0 by ldmatrix), two MMAs a C (columns 0 .. 2, 4 .. 6), a shuffle down / up"""
    S, ivp = ints(64, 8), [gauss(8, 1), gauss(8, 1e-3), gauss(8, 1e-6)]
    got = {}
    for hv in range(2):
        m = [[S[32 * hv + 8 * mm + (lane >> 2)][2 * (lane & 3):2 * (lane & 3) + 2] for mm in range(4)] for lane in range(32)]
        c = [[0.0] * 4 for _ in range(32)]
        for k in range(2):
            af, bf = [], []
            for lane in range(32):
                g, t = lane >> 2, lane & 3
                af.append((m[lane][2 * k], m[lane][2 * k + 1], Z, Z))
                bv = ivp[g & 3][2 * t:2 * t + 2] if (g & 3) < 3 else Z
                bf.append((bv if (g < 4) == (k == 0) else Z, Z))
            mma(c, af, bf)
        e = [c[lane][0] + c[lane][1] for lane in range(32)]
        f = [c[lane][2] + c[lane][3] for lane in range(32)]
        for lane in range(32):
            g, t = lane >> 2, lane & 3
            en = e[lane + 1] if lane < 31 else e[lane]
            fu = f[lane - 1] if lane > 0 else f[lane]
            got[32 * hv + 16 * (t >> 1) + 8 * (t & 1) + g] = f[lane] + fu if t & 1 else e[lane] + en   # mo_tcb_row
    ref = [sum(S[i][k] * sum(p[k] for p in ivp) for k in range(8)) for i in range(64)]
    check("bf16 down", got, ref)


if __name__ == "__main__":
    random.seed(57)
    fp8_gate_up()
    fp8_down()
    bf16_gate_up()
    bf16_down()

#!/usr/bin/env python3
"""Prints the musl libm table constants linked into the official engine (needle.wasm) as C++ hex
literals, for lib/kernels/libm.cpp. Development tool, run once; not part of the build or tests.

Needs OFFICIAL_PKG=<...>/node_modules/@tyler71/cactus-needle2. The constants live in the wasm data
section (linear-memory addresses below, as NUMERICS.md section 9 lists them):
  8432  exp2f table, 32 x uint64 (2^(i/32) with the index bits pre-subtracted from the exponent)
  8688  exp2f: shift_scaled, poly[3]           (used by powf)
  8720  exp2f: shift, invln2_scaled, poly_scaled[3]  (used by expf)
  13000 logf table, 16 x {invc, logc}; 13256 ln2; 13264 poly[3]
  13288 powf log2 table, 16 x {invc, logc (log2)}; 13544 poly[5]
  6272  exp (double): invln2N, shift, negln2hiN, negln2loN, poly[4]; 6384 table, 128 x {tail,
        sbits} (2^(i/128) with the index bits pre-subtracted from the exponent)
  8760  log (double): ln2hi, ln2lo, poly[5]; 8816 poly1[11]; 8904 table, 128 x {invc, logc};
        10952 table2, 128 x {chi, clo}
The sin/cos kernel coefficients are f64.const immediates in the code, not data; libm.cpp carries
them as the verified numpy port (official-numerics/libm.py) has them, and the tests check the
results against the engine. The bits of 2/pi (for libm.cpp's large-argument fallback, not from the
engine) are computed here with integer arithmetic.
"""
import os
import struct
import sys


def leb128(b, i):
    r = s = 0
    while True:
        x = b[i]
        i += 1
        r |= (x & 0x7f) << s
        s += 7
        if not x & 0x80:
            return r, i


def sleb128(b, i):
    r = s = 0
    while True:
        x = b[i]
        i += 1
        r |= (x & 0x7f) << s
        s += 7
        if not x & 0x80:
            if x & 0x40:
                r -= 1 << s
            return r, i


def memory_image(path):
    """The initial linear memory (active data segments of a wasm module)."""
    b = open(path, 'rb').read()
    assert b[:4] == b'\0asm'
    mem = bytearray(1 << 20)
    i = 8
    while i < len(b):
        sid = b[i]
        size, i = leb128(b, i + 1)
        if sid == 11:  # data section
            j = i
            n, j = leb128(b, j)
            for _ in range(n):
                flags, j = leb128(b, j)
                assert flags == 0 and b[j] == 0x41  # active, i32.const offset
                off, j = sleb128(b, j + 1)
                assert b[j] == 0x0b
                ln, j = leb128(b, j + 1)
                mem[off:off + ln] = b[j:j + ln]
                j += ln
        i += size
    return bytes(mem)


def two_over_pi_words(words=8):
    """The first 32*words bits of 2/pi after the binary point, from Machin's formula."""
    def arctan_inv(x, one):
        total = term = one // x
        n, sign = 1, -1
        while term:
            term //= x * x
            n += 2
            total += sign * (term // n)
            sign = -sign
        return total
    guard = 64
    one = 1 << (32 * words + guard)
    pi = 4 * (4 * arctan_inv(5, one) - arctan_inv(239, one))  # pi * one
    v = (2 * one << (32 * words)) // pi
    return [(v >> (32 * (words - 1 - j))) & 0xffffffff for j in range(words)]


def main():
    pkg = os.environ.get('OFFICIAL_PKG')
    if not pkg:
        sys.exit('set OFFICIAL_PKG to the installed @tyler71/cactus-needle2 package folder')
    m = memory_image(os.path.join(pkg, 'vendor', 'wasm', 'needle.wasm'))
    u64 = lambda a: struct.unpack('<Q', m[a:a + 8])[0]
    f64 = lambda a: struct.unpack('<d', m[a:a + 8])[0]
    h = lambda a: f64(a).hex()

    def table(a, rows, cols):
        out = []
        for r in range(rows):
            out.append('    {' + ', '.join(h(a + 8 * (r * cols + c)) for c in range(cols)) + '},')
        return out

    print('// exp2f table (wasm memory 8432)')
    print('constexpr uint64_t kExp2Table[32] = {')
    for r in range(0, 32, 3):
        print('    ' + ' '.join('0x%016x,' % u64(8432 + 8 * i) for i in range(r, min(r + 3, 32))))
    print('};')
    print('constexpr double kExp2ShiftScaled = %s;  // 8688' % h(8688))
    print('constexpr double kExp2Poly[3] = {%s, %s, %s};  // 8696' % (h(8696), h(8704), h(8712)))
    print('constexpr double kExpShift = %s;  // 8720' % h(8720))
    print('constexpr double kExpInvLn2N = %s;  // 8728' % h(8728))
    print('constexpr double kExpPoly[3] = {%s, %s, %s};  // 8736' % (h(8736), h(8744), h(8752)))
    print('// logf table {invc, logc} (13000)')
    print('constexpr double kLogTable[16][2] = {')
    print('\n'.join(table(13000, 16, 2)))
    print('};')
    print('constexpr double kLogLn2 = %s;  // 13256' % h(13256))
    print('constexpr double kLogPoly[3] = {%s, %s, %s};  // 13264' % (h(13264), h(13272), h(13280)))
    print('// powf log2 table {invc, log2(c)} (13288)')
    print('constexpr double kPowLog2Table[16][2] = {')
    print('\n'.join(table(13288, 16, 2)))
    print('};')
    print('constexpr double kPowLog2Poly[5] = {%s};  // 13544' %
          ', '.join(h(13544 + 8 * i) for i in range(5)))
    print('// exp (double): constants (6272) and table {tail, sbits} (6384)')
    print('constexpr double kExpdInvLn2N = %s, kExpdShift = %s;' % (h(6272), h(6280)))
    print('constexpr double kExpdNegLn2HiN = %s, kExpdNegLn2LoN = %s;' % (h(6288), h(6296)))
    print('constexpr double kExpdPoly[4] = {%s};' % ', '.join(h(6304 + 8 * i) for i in range(4)))
    print('constexpr uint64_t kExpdTable[256] = {')
    for r in range(0, 256, 3):
        print('    ' + ' '.join('0x%016x,' % u64(6384 + 8 * i) for i in range(r, min(r + 3, 256))))
    print('};')
    print('// log (double): constants (8760), poly1 (8816), table {invc, logc} (8904), table2 '
          '{chi, clo} (10952)')
    print('constexpr double kLogdLn2Hi = %s, kLogdLn2Lo = %s;' % (h(8760), h(8768)))
    print('constexpr double kLogdPoly[5] = {%s};' % ', '.join(h(8776 + 8 * i) for i in range(5)))
    print('constexpr double kLogdPoly1[11] = {%s};' %
          ', '.join(h(8816 + 8 * i) for i in range(11)))
    print('constexpr double kLogdTable[128][2] = {')
    print('\n'.join(table(8904, 128, 2)))
    print('};')
    print('constexpr double kLogdTable2[128][2] = {')
    print('\n'.join(table(10952, 128, 2)))
    print('};')
    print('constexpr uint32_t kTwoOverPiBits[8] = {%s};' %
          ', '.join('0x%08x' % w for w in two_over_pi_words()))


if __name__ == '__main__':
    main()

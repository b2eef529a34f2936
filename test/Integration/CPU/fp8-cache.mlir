// Every fp8 bit pattern through the CPU path, end to end (mlir-runner): one
// key per sequence (so the output is that key's value), values the 256
// patterns of each format, unsplit and split. Expected values: the formats'
// definitions (sign, exponent, mantissa; E4M3FN has no infinities and one
// NaN per sign, E5M2 is IEEE-like), times the value scale: 0.5 per tensor
// for E4M3FN, 2^-b per (token, KV head) for E5M2's sequence b. A negative
// zero prints as 0: the output is a sum that starts at +0.

// RUN: fd-opt %s -fd-lower-to-cpu | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s
// RUN: fd-opt %s -fd-split-kv=num-splits=3 -fd-lower-to-cpu | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s

// E4M3FN, per-tensor scale 0.5.
// CHECK: Unranked Memref
// CHECK-NEXT: 0,    0.000976562,    0.00195312,    0.00292969,    0.00390625,    0.00488281,    0.00585938,    0.00683594,    0.0078125,    0.00878906,    0.00976562,    0.0107422,    0.0117188,    0.0126953,    0.0136719,    0.0146484,    0.015625,    0.0175781,    0.0195312,    0.0214844,    0.0234375,    0.0253906,    0.0273438,    0.0292969,    0.03125,    0.0351562,    0.0390625,    0.0429688,    0.046875,    0.0507812,    0.0546875,    0.0585938
// CHECK-NEXT: 0.0625,    0.0703125,    0.078125,    0.0859375,    0.09375,    0.101562,    0.109375,    0.117188,    0.125,    0.140625,    0.15625,    0.171875,    0.1875,    0.203125,    0.21875,    0.234375,    0.25,    0.28125,    0.3125,    0.34375,    0.375,    0.40625,    0.4375,    0.46875,    0.5,    0.5625,    0.625,    0.6875,    0.75,    0.8125,    0.875,    0.9375
// CHECK-NEXT: 1,    1.125,    1.25,    1.375,    1.5,    1.625,    1.75,    1.875,    2,    2.25,    2.5,    2.75,    3,    3.25,    3.5,    3.75,    4,    4.5,    5,    5.5,    6,    6.5,    7,    7.5,    8,    9,    10,    11,    12,    13,    14,    15
// CHECK-NEXT: 16,    18,    20,    22,    24,    26,    28,    30,    32,    36,    40,    44,    48,    52,    56,    60,    64,    72,    80,    88,    96,    104,    112,    120,    128,    144,    160,    176,    192,    208,    224,    {{-?}}nan
// CHECK-NEXT: 0,    -0.000976562,    -0.00195312,    -0.00292969,    -0.00390625,    -0.00488281,    -0.00585938,    -0.00683594,    -0.0078125,    -0.00878906,    -0.00976562,    -0.0107422,    -0.0117188,    -0.0126953,    -0.0136719,    -0.0146484,    -0.015625,    -0.0175781,    -0.0195312,    -0.0214844,    -0.0234375,    -0.0253906,    -0.0273438,    -0.0292969,    -0.03125,    -0.0351562,    -0.0390625,    -0.0429688,    -0.046875,    -0.0507812,    -0.0546875,    -0.0585938
// CHECK-NEXT: -0.0625,    -0.0703125,    -0.078125,    -0.0859375,    -0.09375,    -0.101562,    -0.109375,    -0.117188,    -0.125,    -0.140625,    -0.15625,    -0.171875,    -0.1875,    -0.203125,    -0.21875,    -0.234375,    -0.25,    -0.28125,    -0.3125,    -0.34375,    -0.375,    -0.40625,    -0.4375,    -0.46875,    -0.5,    -0.5625,    -0.625,    -0.6875,    -0.75,    -0.8125,    -0.875,    -0.9375
// CHECK-NEXT: -1,    -1.125,    -1.25,    -1.375,    -1.5,    -1.625,    -1.75,    -1.875,    -2,    -2.25,    -2.5,    -2.75,    -3,    -3.25,    -3.5,    -3.75,    -4,    -4.5,    -5,    -5.5,    -6,    -6.5,    -7,    -7.5,    -8,    -9,    -10,    -11,    -12,    -13,    -14,    -15
// CHECK-NEXT: -16,    -18,    -20,    -22,    -24,    -26,    -28,    -30,    -32,    -36,    -40,    -44,    -48,    -52,    -56,    -60,    -64,    -72,    -80,    -88,    -96,    -104,    -112,    -120,    -128,    -144,    -160,    -176,    -192,    -208,    -224,    {{-?}}nan
// E5M2, per-token scale 2^-b.
// CHECK: Unranked Memref
// CHECK-NEXT: 0,    1.52588e-05,    3.05176e-05,    4.57764e-05,    6.10352e-05,    7.62939e-05,    9.15527e-05,    0.000106812,    0.00012207,    0.000152588,    0.000183105,    0.000213623,    0.000244141,    0.000305176,    0.000366211,    0.000427246,    0.000488281,    0.000610352,    0.000732422,    0.000854492,    0.000976562,    0.0012207,    0.00146484,    0.00170898,    0.00195312,    0.00244141,    0.00292969,    0.00341797,    0.00390625,    0.00488281,    0.00585938,    0.00683594
// CHECK-NEXT: 0.00390625,    0.00488281,    0.00585938,    0.00683594,    0.0078125,    0.00976562,    0.0117188,    0.0136719,    0.015625,    0.0195312,    0.0234375,    0.0273438,    0.03125,    0.0390625,    0.046875,    0.0546875,    0.0625,    0.078125,    0.09375,    0.109375,    0.125,    0.15625,    0.1875,    0.21875,    0.25,    0.3125,    0.375,    0.4375,    0.5,    0.625,    0.75,    0.875
// CHECK-NEXT: 0.5,    0.625,    0.75,    0.875,    1,    1.25,    1.5,    1.75,    2,    2.5,    3,    3.5,    4,    5,    6,    7,    8,    10,    12,    14,    16,    20,    24,    28,    32,    40,    48,    56,    64,    80,    96,    112
// CHECK-NEXT: 64,    80,    96,    112,    128,    160,    192,    224,    256,    320,    384,    448,    512,    640,    768,    896,    1024,    1280,    1536,    1792,    2048,    2560,    3072,    3584,    4096,    5120,    6144,    7168,    inf,    {{-?}}nan,    {{-?}}nan,    {{-?}}nan
// CHECK-NEXT: 0,    -9.53674e-07,    -1.90735e-06,    -2.86102e-06,    -3.8147e-06,    -4.76837e-06,    -5.72205e-06,    -6.67572e-06,    -7.62939e-06,    -9.53674e-06,    -1.14441e-05,    -1.33514e-05,    -1.52588e-05,    -1.90735e-05,    -2.28882e-05,    -2.67029e-05,    -3.05176e-05,    -3.8147e-05,    -4.57764e-05,    -5.34058e-05,    -6.10352e-05,    -7.62939e-05,    -9.15527e-05,    -0.000106812,    -0.00012207,    -0.000152588,    -0.000183105,    -0.000213623,    -0.000244141,    -0.000305176,    -0.000366211,    -0.000427246
// CHECK-NEXT: -0.000244141,    -0.000305176,    -0.000366211,    -0.000427246,    -0.000488281,    -0.000610352,    -0.000732422,    -0.000854492,    -0.000976562,    -0.0012207,    -0.00146484,    -0.00170898,    -0.00195312,    -0.00244141,    -0.00292969,    -0.00341797,    -0.00390625,    -0.00488281,    -0.00585938,    -0.00683594,    -0.0078125,    -0.00976562,    -0.0117188,    -0.0136719,    -0.015625,    -0.0195312,    -0.0234375,    -0.0273438,    -0.03125,    -0.0390625,    -0.046875,    -0.0546875
// CHECK-NEXT: -0.03125,    -0.0390625,    -0.046875,    -0.0546875,    -0.0625,    -0.078125,    -0.09375,    -0.109375,    -0.125,    -0.15625,    -0.1875,    -0.21875,    -0.25,    -0.3125,    -0.375,    -0.4375,    -0.5,    -0.625,    -0.75,    -0.875,    -1,    -1.25,    -1.5,    -1.75,    -2,    -2.5,    -3,    -3.5,    -4,    -5,    -6,    -7
// CHECK-NEXT: -4,    -5,    -6,    -7,    -8,    -10,    -12,    -14,    -16,    -20,    -24,    -28,    -32,    -40,    -48,    -56,    -64,    -80,    -96,    -112,    -128,    -160,    -192,    -224,    -256,    -320,    -384,    -448,    -inf,    {{-?}}nan,    {{-?}}nan,    {{-?}}nan

func.func private @printMemrefF32(memref<*xf32>)

// E4M3FN with per-tensor scales: output = decode(v) * 0.5.
func.func @e4m3(%q: memref<8x1x32xf32>, %k: memref<8x1x1x32xf8E4M3FN>,
                %v: memref<8x1x1x32xf8E4M3FN>, %lens: memref<8xi32>,
                %ks: memref<1xf32>, %vs: memref<1xf32>, %out: memref<8x1x32xf32>) {
  fd.attention %q, %k, %v, %lens k_scale %ks : memref<1xf32> v_scale %vs : memref<1xf32> into %out
      : memref<8x1x32xf32>, memref<8x1x1x32xf8E4M3FN>, memref<8x1x1x32xf8E4M3FN>,
        memref<8xi32> into memref<8x1x32xf32>
  return
}

// E5M2 with per-(token, KV head) scales: sequence b's value scale is 2^-b.
func.func @e5m2(%q: memref<8x1x32xf32>, %k: memref<8x1x1x32xf8E5M2>,
                %v: memref<8x1x1x32xf8E5M2>, %lens: memref<8xi32>,
                %ks: memref<8x1x1xf32>, %vs: memref<8x1x1xf32>, %out: memref<8x1x32xf32>) {
  fd.attention %q, %k, %v, %lens k_scale %ks : memref<8x1x1xf32> v_scale %vs : memref<8x1x1xf32> into %out
      : memref<8x1x32xf32>, memref<8x1x1x32xf8E5M2>, memref<8x1x1x32xf8E5M2>,
        memref<8xi32> into memref<8x1x32xf32>
  return
}

func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c32 = arith.constant 32 : index
  %one = arith.constant 1.0 : f32
  %half = arith.constant 0.5 : f32
  %len = arith.constant 1 : i32
  %q = memref.alloc() : memref<8x1x32xf32>
  %k4 = memref.alloc() : memref<8x1x1x32xf8E4M3FN>
  %v4 = memref.alloc() : memref<8x1x1x32xf8E4M3FN>
  %k5 = memref.alloc() : memref<8x1x1x32xf8E5M2>
  %v5 = memref.alloc() : memref<8x1x1x32xf8E5M2>
  %lens = memref.alloc() : memref<8xi32>
  %ks = memref.alloc() : memref<1xf32>
  %vs = memref.alloc() : memref<1xf32>
  %ks5 = memref.alloc() : memref<8x1x1xf32>
  %vs5 = memref.alloc() : memref<8x1x1xf32>
  %out = memref.alloc() : memref<8x1x32xf32>
  memref.store %one, %ks[%c0] : memref<1xf32>
  memref.store %half, %vs[%c0] : memref<1xf32>
  // Every key is 1.0 (E4M3FN 0x38, E5M2 0x3C); value element (b, d) is the
  // pattern 32 b + d: every pattern once.
  %k4bits = arith.constant 0x38 : i8
  %k5bits = arith.constant 0x3C : i8
  %k4one = arith.bitcast %k4bits : i8 to f8E4M3FN
  %k5one = arith.bitcast %k5bits : i8 to f8E5M2
  scf.for %b = %c0 to %c8 step %c1 {
    memref.store %len, %lens[%b] : memref<8xi32>
    %bi = arith.index_cast %b : index to i32
    %bf = arith.sitofp %bi : i32 to f32
    %neg = arith.negf %bf : f32
    %scale = math.exp2 %neg : f32
    memref.store %one, %ks5[%b, %c0, %c0] : memref<8x1x1xf32>
    memref.store %scale, %vs5[%b, %c0, %c0] : memref<8x1x1xf32>
    scf.for %d = %c0 to %c32 step %c1 {
      memref.store %one, %q[%b, %c0, %d] : memref<8x1x32xf32>
      memref.store %k4one, %k4[%b, %c0, %c0, %d] : memref<8x1x1x32xf8E4M3FN>
      memref.store %k5one, %k5[%b, %c0, %c0, %d] : memref<8x1x1x32xf8E5M2>
      %row = arith.muli %b, %c32 : index
      %pattern = arith.addi %row, %d : index
      %bits = arith.index_cast %pattern : index to i8
      %v4e = arith.bitcast %bits : i8 to f8E4M3FN
      %v5e = arith.bitcast %bits : i8 to f8E5M2
      memref.store %v4e, %v4[%b, %c0, %c0, %d] : memref<8x1x1x32xf8E4M3FN>
      memref.store %v5e, %v5[%b, %c0, %c0, %d] : memref<8x1x1x32xf8E5M2>
    }
  }
  call @e4m3(%q, %k4, %v4, %lens, %ks, %vs, %out)
      : (memref<8x1x32xf32>, memref<8x1x1x32xf8E4M3FN>, memref<8x1x1x32xf8E4M3FN>,
         memref<8xi32>, memref<1xf32>, memref<1xf32>, memref<8x1x32xf32>) -> ()
  %printed = memref.cast %out : memref<8x1x32xf32> to memref<*xf32>
  call @printMemrefF32(%printed) : (memref<*xf32>) -> ()
  call @e5m2(%q, %k5, %v5, %lens, %ks5, %vs5, %out)
      : (memref<8x1x32xf32>, memref<8x1x1x32xf8E5M2>, memref<8x1x1x32xf8E5M2>,
         memref<8xi32>, memref<8x1x1xf32>, memref<8x1x1xf32>, memref<8x1x32xf32>) -> ()
  call @printMemrefF32(%printed) : (memref<*xf32>) -> ()
  return
}

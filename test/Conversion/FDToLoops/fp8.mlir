// RUN: fd-opt %s -split-input-file -convert-fd-to-loops | FileCheck %s

// An fp8 cache element is decoded exactly (AttentionUtils.h,
// buildFloat8ToF32) and times its scale: E4M3FN through an f16 holding its
// magnitude bits, times 2^8, its NaN apart; the per-tensor scale is [0].
// CHECK-LABEL: func.func @e4m3_per_tensor
// CHECK-SAME: %[[K:[a-z0-9]+]]: memref<1x?x2x64xf8E4M3FN>, %[[V:[a-z0-9]+]]: memref<1x?x2x64xf8E4M3FN>, %{{.*}}: memref<1xi32>, %[[KS:[a-z0-9]+]]: memref<1xf32>, %[[VS:[a-z0-9]+]]: memref<1xf32>
// CHECK: %[[KSCALE:.*]] = memref.load %[[KS]][%{{.*}}] : memref<1xf32>
// CHECK: %[[KELEM:.*]] = memref.load %[[K]]
// CHECK: %[[KBITS:.*]] = arith.bitcast %[[KELEM]] : f8E4M3FN to i8
// CHECK: arith.extui %[[KBITS]] : i8 to i16
// CHECK: %[[KHALF:.*]] = arith.bitcast %{{.*}} : i16 to f16
// CHECK: %[[KWIDE:.*]] = arith.extf %[[KHALF]] : f16 to f32
// CHECK: %[[KMAG:.*]] = arith.mulf %[[KWIDE]], %{{.*}} : f32
// CHECK: %[[KNAN:.*]] = arith.cmpi eq
// CHECK: %[[KDEC:.*]] = arith.select %[[KNAN]], %{{.*}}, %[[KMAG]] : f32
// CHECK: arith.mulf %[[KDEC]], %[[KSCALE]] : f32
// CHECK: memref.load %[[V]]
// CHECK: arith.bitcast %{{.*}} : f8E4M3FN to i8
func.func @e4m3_per_tensor(%q: memref<1x8x64xf16>, %k: memref<1x?x2x64xf8E4M3FN>, %v: memref<1x?x2x64xf8E4M3FN>, %l: memref<1xi32>, %ks: memref<1xf32>, %vs: memref<1xf32>, %o: memref<1x8x64xf16>) {
  fd.attention %q, %k, %v, %l k_scale %ks : memref<1xf32> v_scale %vs : memref<1xf32> into %o : memref<1x8x64xf16>, memref<1x?x2x64xf8E4M3FN>, memref<1x?x2x64xf8E4M3FN>, memref<1xi32> into memref<1x8x64xf16>
  return
}

// -----

// E5M2 is an f16's high byte; per-(token, KV head) scales are read at the
// cache row's indices (HND: [b, h, j]).
// CHECK-LABEL: func.func @e5m2_per_token_hnd
// CHECK-SAME: %[[K:[a-z0-9]+]]: memref<1x2x?x64xf8E5M2>, %{{.*}}: memref<1x2x?x64xf8E5M2>, %{{.*}}: memref<1xi32>, %[[KS:[a-z0-9]+]]: memref<1x2x?xf32>
// CHECK: %[[KSCALE:.*]] = memref.load %[[KS]][%[[B:.*]], %[[H:.*]], %[[J:.*]]] : memref<1x2x?xf32>
// CHECK: %[[KELEM:.*]] = memref.load %[[K]][%[[B]], %[[H]], %[[J]], %{{.*}}]
// CHECK: %[[KBITS:.*]] = arith.bitcast %[[KELEM]] : f8E5M2 to i8
// CHECK: %[[KWIDE:.*]] = arith.extui %[[KBITS]] : i8 to i16
// CHECK: %[[KHIGH:.*]] = arith.shli %[[KWIDE]], %{{.*}} : i16
// CHECK: %[[KHALF:.*]] = arith.bitcast %[[KHIGH]] : i16 to f16
// CHECK: %[[KDEC:.*]] = arith.extf %[[KHALF]] : f16 to f32
// CHECK: arith.mulf %[[KDEC]], %[[KSCALE]] : f32
func.func @e5m2_per_token_hnd(%q: memref<1x4x64xbf16>, %k: memref<1x2x?x64xf8E5M2>, %v: memref<1x2x?x64xf8E5M2>, %l: memref<1xi32>, %ks: memref<1x2x?xf32>, %vs: memref<1x2x?xf32>, %o: memref<1x4x64xbf16>) {
  fd.attention %q, %k, %v, %l k_scale %ks : memref<1x2x?xf32> v_scale %vs : memref<1x2x?xf32> into %o {kv_layout = #fd.kv_layout<HND>} : memref<1x4x64xbf16>, memref<1x2x?x64xf8E5M2>, memref<1x2x?x64xf8E5M2>, memref<1xi32> into memref<1x4x64xbf16>
  return
}

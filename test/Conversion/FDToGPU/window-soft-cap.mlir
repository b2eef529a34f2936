// RUN: fd-opt %s -split-input-file -fd-schedule-kernels=chip=sm_80 -convert-fd-to-gpu=chip=sm_80 | FileCheck %s

// A sliding window with one query token: the chunks start at the window
// (max(0, len - W)), so no key needs a mask; the soft-cap shapes each score
// (2^(2x/c') + 1, then c' - 2c' / that, c' the cap in base-2 units) before
// the row's max.

// CHECK-LABEL: gpu.func @fd_partial_attention
// CHECK: %[[LEN:.*]] = arith.minsi
// CHECK: %[[FIRST:.*]] = arith.subi %[[LEN]], %c128
// CHECK: arith.maxsi %[[FIRST]], %c0
// CHECK: scf.for
// CHECK: nvvm.mma.sync
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.f32"
// CHECK: arith.addf {{.*}}, %cst
// CHECK: arith.divf
// CHECK: arith.subf
// CHECK: arith.maximumf
// CHECK-NOT: arith.cmpi sge
// CHECK: gpu.return
func.func @window_one_token(%q: memref<1x32x128xf16>, %k: memref<1x?x8x128xf16>,
                            %v: memref<1x?x8x128xf16>, %lens: memref<1xi32>,
                            %po: memref<1x32x2x128xf32>, %pl: memref<1x32x2xf32>) {
  fd.partial_attention %q, %k, %v, %lens into %po, %pl {window_left = 128, logits_soft_cap = 50.0 : f32}
      : memref<1x32x128xf16>, memref<1x?x8x128xf16>, memref<1x?x8x128xf16>,
        memref<1xi32> into memref<1x32x2x128xf32>, memref<1x32x2xf32>
  return
}

// -----

// With Lq = 4 the query tokens' windows differ: on tensor cores each lane
// row masks keys before its window start (sge) as well as after its
// position (slt).

// CHECK-LABEL: gpu.func @fd_partial_attention
// CHECK: scf.for
// CHECK: nvvm.mma.sync
// CHECK: arith.cmpi slt
// CHECK: arith.cmpi sge
// CHECK: arith.andi
func.func @window_speculative(%q: memref<1x4x32x128xf16>, %k: memref<1x?x8x128xf16>,
                              %v: memref<1x?x8x128xf16>, %lens: memref<1xi32>,
                              %po: memref<1x4x32x2x128xf32>, %pl: memref<1x4x32x2xf32>) {
  fd.partial_attention %q, %k, %v, %lens into %po, %pl {window_left = 3}
      : memref<1x4x32x128xf16>, memref<1x?x8x128xf16>, memref<1x?x8x128xf16>,
        memref<1xi32> into memref<1x4x32x2x128xf32>, memref<1x4x32x2xf32>
  return
}

// -----

// On CUDA cores (f32) with Lq = 3 and a window, the keys some token does not
// see stream in masked loops of their own, before the unmasked main loop:
// the window's first keys, then the last ones.

// CHECK-LABEL: gpu.func @fd_partial_attention
// CHECK: %[[FRONT:[0-9]+]]:18 = scf.for %{{.*}} = %{{[0-9]+}} to %[[UNMASKED_BEGIN:[0-9]+]] step %c8 iter_args
// CHECK: %[[TAIL:[0-9]+]]:18 = scf.for %{{.*}} = %[[UNMASKED_END:[0-9]+]] to %{{[0-9]+}} step %c8 iter_args(%{{.*}} = %[[FRONT]]#0
// CHECK: scf.for %{{.*}} = %[[UNMASKED_BEGIN]] to %[[UNMASKED_END]] step %c32 iter_args(%{{.*}} = %[[TAIL]]#0
// CHECK: gpu.return
func.func @window_cuda_cores(%q: memref<1x3x8x64xf32>, %k: memref<1x?x8x64xf32>,
                             %v: memref<1x?x8x64xf32>, %lens: memref<1xi32>,
                             %po: memref<1x3x8x2x64xf32>, %pl: memref<1x3x8x2xf32>) {
  fd.partial_attention %q, %k, %v, %lens into %po, %pl {window_left = 16}
      : memref<1x3x8x64xf32>, memref<1x?x8x64xf32>, memref<1x?x8x64xf32>,
        memref<1xi32> into memref<1x3x8x2x64xf32>, memref<1x3x8x2xf32>
  return
}

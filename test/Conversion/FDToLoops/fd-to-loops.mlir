// RUN: fd-opt %s -split-input-file -convert-fd-to-loops | FileCheck %s

// The partial kernel: a (b, s, t, h) nest reads the length at run time,
// derives the chunk from it, streams keys with an online softmax and writes
// a normalized partial and its lse.

// CHECK-LABEL: func @partial
// CHECK-SAME: %[[LENS:[a-z0-9]+]]: memref<?xi32>
// CHECK: %[[ACC:.*]] = memref.alloca() : memref<64xf32>
// CHECK: scf.for %[[B:.*]] =
// CHECK: scf.for %[[S:.*]] =
// CHECK: scf.for
// CHECK: scf.for %[[H:.*]] =
// CHECK: memref.load %[[LENS]][%[[B]]] : memref<?xi32>
// CHECK: arith.ceildivsi
// CHECK: arith.maxsi {{.*}} : index
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (f32, f32)
// CHECK: arith.extf {{.*}} : f16 to f32
// CHECK: arith.maximumf
// CHECK: math.exp
// CHECK: math.exp
// CHECK: math.log
// CHECK: memref.store {{.*}} : memref<?x8x4xf32>
// CHECK-NOT: fd.partial_attention
func.func @partial(%q: memref<?x8x64xf16>, %k: memref<?x?x2x64xf16>, %v: memref<?x?x2x64xf16>,
                   %lens: memref<?xi32>, %po: memref<?x8x4x64xf32>, %pl: memref<?x8x4xf32>) {
  fd.partial_attention %q, %k, %v, %lens into %po, %pl {chunk_length = 16 : i64}
      : memref<?x8x64xf16>, memref<?x?x2x64xf16>, memref<?x?x2x64xf16>,
        memref<?xi32> into memref<?x8x4x64xf32>, memref<?x8x4xf32>
  return
}

// -----

// The merge: max of the partial lse, weights exp(lse - max) (shifted by 0
// when every chunk is empty), weighted sum, rounding to the output type.

// CHECK-LABEL: func @merge
// CHECK: %[[W:.*]] = memref.alloca() : memref<4xf32>
// CHECK: scf.for
// CHECK: arith.maximumf
// CHECK: arith.cmpf oeq
// CHECK: arith.select
// CHECK: math.exp
// CHECK: memref.store {{.*}}, %[[W]]
// CHECK: arith.truncf {{.*}} : f32 to bf16
// CHECK: math.log
// CHECK-NOT: fd.merge
func.func @merge(%po: memref<2x8x4x64xf32>, %pl: memref<2x8x4xf32>,
                 %out: memref<2x8x64xbf16>, %lse: memref<2x8xf32>) {
  fd.merge %po, %pl into %out, %lse
      : memref<2x8x4x64xf32>, memref<2x8x4xf32> into memref<2x8x64xbf16>, memref<2x8xf32>
  return
}

// -----

// Unsplit attention over an HND cache: positions are dimension 2, the
// causal limit appears for Lq > 1.

// CHECK-LABEL: func @attention_hnd
// CHECK: memref.dim %{{.*}}, %c2 : memref<?x1x?x32xf32>
// CHECK: arith.addi
// CHECK: arith.minsi
// CHECK: memref.load %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] : memref<?x1x?x32xf32>
// CHECK-NOT: fd.attention
func.func @attention_hnd(%q: memref<?x2x4x32xf32>, %k: memref<?x1x?x32xf32>, %v: memref<?x1x?x32xf32>,
                         %lens: memref<?xi32>, %out: memref<?x2x4x32xf32>) {
  fd.attention %q, %k, %v, %lens into %out {kv_layout = #fd.kv_layout<HND>}
      : memref<?x2x4x32xf32>, memref<?x1x?x32xf32>, memref<?x1x?x32xf32>,
        memref<?xi32> into memref<?x2x4x32xf32>
  return
}

// -----

// A paged cache: each key position reads its page from the block table
// once (clamped into the pool), then the slot within the page.

// CHECK-LABEL: func @paged
// CHECK-SAME: %[[K:[a-z0-9]+]]: memref<?x16x2x64xf32>, %{{.*}}: memref<?x16x2x64xf32>, %{{.*}}: memref<?xi32>, %[[BT:[a-z0-9]+]]: memref<?x?xi32>
// CHECK: %[[MAXPAGES:.*]] = memref.dim %[[BT]], %c1
// CHECK: arith.muli %[[MAXPAGES]], %c16
// CHECK: scf.for %[[J:.*]] = {{.*}} iter_args
// CHECK: %[[BLOCK:.*]] = arith.divui %[[J]], %c16
// CHECK: %[[PAGE:.*]] = memref.load %[[BT]][%{{.*}}, %[[BLOCK]]] : memref<?x?xi32>
// CHECK: arith.remui %[[J]], %c16
func.func @paged(%q: memref<?x8x64xf32>, %k: memref<?x16x2x64xf32>, %v: memref<?x16x2x64xf32>,
                 %lens: memref<?xi32>, %table: memref<?x?xi32>, %out: memref<?x8x64xf32>) {
  fd.attention %q, %k, %v, %lens block_table %table : memref<?x?xi32> into %out
      : memref<?x8x64xf32>, memref<?x16x2x64xf32>, memref<?x16x2x64xf32>,
        memref<?xi32> into memref<?x8x64xf32>
  return
}

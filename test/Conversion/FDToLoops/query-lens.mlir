// RUN: fd-opt %s -split-input-file -convert-fd-to-loops | FileCheck %s

// Per-sequence query lengths on loops: each row reads its sequence's
// entry, clamps it to [0, Lq] and is a query iff its token t < n; a query
// sees keys up to length - n + t, a padding row none and no sink (zeros,
// lse -inf).

// CHECK-LABEL: func @attention
// CHECK-SAME: %[[LENS:[a-z0-9]+]]: memref<?xi32>, %[[QL:[a-z0-9]+]]: memref<?xi32>, %[[S:[a-z0-9]+]]: memref<8xf32>
// CHECK: scf.for %[[B:.*]] =
// CHECK: scf.for
// CHECK: scf.for %[[T:.*]] =
// CHECK: %[[ENTRY:.*]] = memref.load %[[QL]][%[[B]]] : memref<?xi32>
// CHECK: memref.load %[[LENS]][%[[B]]] : memref<?xi32>
// CHECK: %[[LEN:.*]] = arith.minsi %{{.*}}, %{{.*}} : index
// CHECK: %[[ENTRY_INDEX:.*]] = arith.index_cast %[[ENTRY]] : i32 to index
// CHECK: %[[AT_LEAST_0:.*]] = arith.maxsi %[[ENTRY_INDEX]], %{{.*}} : index
// CHECK-NEXT: %[[N:.*]] = arith.minsi %[[AT_LEAST_0]], %c4{{(_[0-9]+)?}} : index
// CHECK-NEXT: %[[IS_QUERY:.*]] = arith.cmpi slt, %[[T]], %[[N]] : index
// CHECK: %[[FIRST_TOKEN:.*]] = arith.subi %[[LEN]], %[[N]] : index
// CHECK: %[[CAUSAL:.*]] = arith.minsi %[[LEN]], %{{.*}} : index
// CHECK-NEXT: %[[END:.*]] = arith.select %[[IS_QUERY]], %[[CAUSAL]], %{{.*}} : index
// CHECK: %[[SINK:.*]] = memref.load %[[S]]
// CHECK: arith.select %[[IS_QUERY]], %[[SINK]], %{{.*}} : f32
func.func @attention(%q: memref<?x4x8x64xf32>, %k: memref<?x?x2x64xf32>, %v: memref<?x?x2x64xf32>,
                     %lens: memref<?xi32>, %ql: memref<?xi32>, %s: memref<8xf32>, %out: memref<?x4x8x64xf32>) {
  fd.attention %q, %k, %v, %lens query_lens %ql : memref<?xi32> sinks %s : memref<8xf32> into %out
      : memref<?x4x8x64xf32>, memref<?x?x2x64xf32>, memref<?x?x2x64xf32>,
        memref<?xi32> into memref<?x4x8x64xf32>
  return
}

// -----

// The partial attention writes only the rows of queries (fd.merge writes
// the others); n = 0 empties the sequence's chunks.

// CHECK-LABEL: func @partial
// CHECK: %[[N:.*]] = arith.minsi %{{.*}}, %c4{{(_[0-9]+)?}} : index
// CHECK-NEXT: %[[IS_QUERY:.*]] = arith.cmpi slt, %{{.*}}, %[[N]] : index
// CHECK-NEXT: scf.if %[[IS_QUERY]] {
// CHECK: %[[NONE:.*]] = arith.cmpi eq, %[[N]], %{{.*}} : index
// CHECK-NEXT: arith.select %[[NONE]], %{{.*}}, %{{.*}} : index
// CHECK: memref.store {{.*}} : memref<?x4x8x3x64xf32>
// CHECK: memref.store {{.*}} : memref<?x4x8x3xf32>
// CHECK-NEXT: }
func.func @partial(%q: memref<?x4x8x64xf32>, %k: memref<?x?x2x64xf32>, %v: memref<?x?x2x64xf32>,
                   %lens: memref<?xi32>, %ql: memref<?xi32>, %po: memref<?x4x8x3x64xf32>, %pl: memref<?x4x8x3xf32>) {
  fd.partial_attention %q, %k, %v, %lens query_lens %ql : memref<?xi32> into %po, %pl
      : memref<?x4x8x64xf32>, memref<?x?x2x64xf32>, memref<?x?x2x64xf32>,
        memref<?xi32> into memref<?x4x8x3x64xf32>, memref<?x4x8x3xf32>
  return
}

// -----

// The merge reads no partial (0 splits) and no sink of a padding row.

// CHECK-LABEL: func @merge
// CHECK-SAME: %[[S:[a-z0-9]+]]: memref<8xf32>, %[[QL:[a-z0-9]+]]: memref<?xi32>
// CHECK: scf.for %[[B:.*]] =
// CHECK: scf.for %[[T:.*]] =
// CHECK: memref.load %[[QL]][%[[B]]] : memref<?xi32>
// CHECK: %[[N:.*]] = arith.minsi %{{.*}}, %c4{{(_[0-9]+)?}} : index
// CHECK-NEXT: %[[IS_QUERY:.*]] = arith.cmpi slt, %[[T]], %[[N]] : index
// CHECK-NEXT: %[[SPLITS:.*]] = arith.select %[[IS_QUERY]], %c3, %c0 : index
// CHECK: scf.for %{{.*}} = %c0 to %[[SPLITS]] step
// CHECK: %[[SINK:.*]] = memref.load %[[S]]
// CHECK: arith.select %[[IS_QUERY]], %[[SINK]], %{{.*}} : f32
// CHECK: scf.for %{{.*}} = %c0 to %[[SPLITS]] step
// CHECK: scf.for %{{.*}} = %c0 to %[[SPLITS]] step
func.func @merge(%po: memref<?x4x8x3x64xf32>, %pl: memref<?x4x8x3xf32>, %s: memref<8xf32>,
                 %ql: memref<?xi32>, %out: memref<?x4x8x64xf16>, %lse: memref<?x4x8xf32>) {
  fd.merge %po, %pl sinks %s : memref<8xf32> query_lens %ql : memref<?xi32> into %out, %lse
      : memref<?x4x8x3x64xf32>, memref<?x4x8x3xf32> into memref<?x4x8x64xf16>, memref<?x4x8xf32>
  return
}

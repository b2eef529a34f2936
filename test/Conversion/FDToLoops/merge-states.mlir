// convert-fd-to-loops on fd.merge_states: a loop over the rows (behind the
// mask's flag when there is one) and the heads; per state, the lse read once
// (+inf and -inf are empty) and weighed with exp, or exp2 for base-2 lses;
// an empty state's row is not read (scf.if); the output element is written
// after every state's element is read, the lse last.
// RUN: fd-opt %s -convert-fd-to-loops | FileCheck %s

// CHECK-LABEL: func.func @natural
// CHECK-SAME: (%[[A:.*]]: memref<?x1x8x64xf16>, %[[B:.*]]: memref<?x2x8x64xf16>, %[[LA:.*]]: memref<?x1x8xf32>, %[[LB:.*]]: memref<?x2x8xf32>, %[[OUT:.*]]: memref<?x8x64xf16>, %[[LSE:.*]]: memref<?x8xf32>)
// CHECK-DAG: %[[WEIGHTS:.*]] = memref.alloca() : memref<3xf32>
// CHECK-DAG: %[[EMPTIES:.*]] = memref.alloca() : memref<3xi1>
// CHECK: %[[ROWS:.*]] = memref.dim %[[OUT]], %{{.*}} :
// CHECK: scf.for %[[ROW:[a-z0-9_]+]] = %{{.*}} to %[[ROWS]]
// CHECK-NOT: scf.if
// CHECK: scf.for %[[HEAD:[a-z0-9_]+]] =
// CHECK: memref.load %[[LA]][%[[ROW]], %{{.*}}, %[[HEAD]]]
// CHECK: arith.cmpf oeq
// CHECK: arith.cmpf oeq
// CHECK: arith.maximumf
// CHECK: memref.load %[[LB]][%[[ROW]], %{{.*}}, %[[HEAD]]]
// CHECK: math.exp
// CHECK-NOT: math.exp2
// CHECK: scf.for %[[DIM:[a-z0-9_]+]] = %{{.*}} to %c64
// CHECK: memref.load %[[EMPTIES]]
// CHECK: scf.if
// CHECK: memref.load %[[A]][%[[ROW]], %{{.*}}, %[[HEAD]], %[[DIM]]] : memref<?x1x8x64xf16>
// CHECK: arith.extf
// CHECK: memref.load %[[B]][%[[ROW]], %{{.*}}, %[[HEAD]], %[[DIM]]] : memref<?x2x8x64xf16>
// CHECK: arith.truncf
// CHECK: memref.store %{{.*}}, %[[OUT]][%[[ROW]], %[[HEAD]], %[[DIM]]]
// CHECK: math.log
// CHECK: memref.store %{{.*}}, %[[LSE]][%[[ROW]], %[[HEAD]]]
func.func @natural(%a: memref<?x1x8x64xf16>, %b: memref<?x2x8x64xf16>,
                   %la: memref<?x1x8xf32>, %lb: memref<?x2x8xf32>,
                   %out: memref<?x8x64xf16>, %lse: memref<?x8xf32>) {
  fd.merge_states %a, %b lses %la, %lb into %out, %lse
      : memref<?x1x8x64xf16>, memref<?x2x8x64xf16>
        lses memref<?x1x8xf32>, memref<?x2x8xf32>
        into memref<?x8x64xf16>, memref<?x8xf32>
  return
}

// CHECK-LABEL: func.func @base2_masked
// CHECK: scf.for %[[ROW:[a-z0-9_]+]] =
// CHECK: %[[FLAG:.*]] = memref.load %{{.*}}[%[[ROW]]] : memref<?xi8>
// CHECK: %[[MERGES:.*]] = arith.cmpi ne, %[[FLAG]]
// CHECK: scf.if %[[MERGES]]
// CHECK: math.exp2
// CHECK: math.log2
func.func @base2_masked(%v: memref<?x4x2x32xf32>, %s: memref<?x4x2xf32>,
                        %mask: memref<?xi8>,
                        %out: memref<?x2x32xf32>, %lse: memref<?x2xf32>) {
  fd.merge_states %v lses %s mask %mask : memref<?xi8> into %out, %lse
      {lse_base2}
      : memref<?x4x2x32xf32> lses memref<?x4x2xf32>
        into memref<?x2x32xf32>, memref<?x2xf32>
  return
}

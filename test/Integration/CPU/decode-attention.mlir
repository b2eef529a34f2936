// The CPU path end to end through mlir-runner, unsplit and split (more splits
// than the 5 keys of the longest sequence, and a fixed chunk), on inputs whose
// attention is computable by hand:
//   scale = 1, q = e_0, k_j = log(j + 1) e_0  =>  score_j = log(j + 1),
//   softmax weight of key j = (j + 1) / sum_{i<n} (i + 1),  v_j = (j + 1) 1.
// So for n visible keys: out = sum (j+1)^2 / sum (j+1), lse = log sum (j+1):
//   n = 0: out 0, lse -inf;  n = 1: out 1, lse 0;
//   n = 4: out 30/10 = 3, lse log 10 = 2.30259;
//   n = 5: out 55/15 = 3.66667, lse log 15 = 2.70805.
// Sequences have lengths 0, 1, 5; two query tokens with the causal rule see
// n - 1 and n keys.

// RUN: fd-opt %s -fd-lower-to-cpu | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s
// RUN: fd-opt %s -fd-split-kv=num-splits=7 -fd-lower-to-cpu | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s
// RUN: fd-opt %s -fd-split-kv="num-splits=3 chunk-length=2" -fd-lower-to-cpu | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s
// RUN: fd-opt %s -fd-split-kv="batch=3 max-len=8" -fd-lower-to-cpu | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s

func.func private @printMemrefF32(memref<*xf32>)

func.func @attention(%q: memref<3x2x2x32xf32>, %k: memref<3x8x1x32xf32>,
                     %v: memref<3x8x1x32xf32>, %lens: memref<3xi32>,
                     %out: memref<3x2x2x32xf32>, %lse: memref<3x2x2xf32>) {
  fd.attention %q, %k, %v, %lens into %out, %lse {scale = 1.0 : f32}
      : memref<3x2x2x32xf32>, memref<3x8x1x32xf32>, memref<3x8x1x32xf32>,
        memref<3xi32> into memref<3x2x2x32xf32>, memref<3x2x2xf32>
  return
}

func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c8 = arith.constant 8 : index
  %c32 = arith.constant 32 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %q = memref.alloc() : memref<3x2x2x32xf32>
  %k = memref.alloc() : memref<3x8x1x32xf32>
  %v = memref.alloc() : memref<3x8x1x32xf32>
  %lens = memref.alloc() : memref<3xi32>
  %out = memref.alloc() : memref<3x2x2x32xf32>
  %lse = memref.alloc() : memref<3x2x2xf32>
  scf.for %b = %c0 to %c3 step %c1 {
    scf.for %t = %c0 to %c2 step %c1 {
      scf.for %h = %c0 to %c2 step %c1 {
        scf.for %d = %c0 to %c32 step %c1 {
          %is0 = arith.cmpi eq, %d, %c0 : index
          %x = arith.select %is0, %one, %zero : f32
          memref.store %x, %q[%b, %t, %h, %d] : memref<3x2x2x32xf32>
        }
      }
    }
    scf.for %j = %c0 to %c8 step %c1 {
      %j1 = arith.addi %j, %c1 : index
      %j1i = arith.index_cast %j1 : index to i32
      %j1f = arith.sitofp %j1i : i32 to f32
      %logj1 = math.log %j1f : f32
      scf.for %d = %c0 to %c32 step %c1 {
        %is0 = arith.cmpi eq, %d, %c0 : index
        %kx = arith.select %is0, %logj1, %zero : f32
        memref.store %kx, %k[%b, %j, %c0, %d] : memref<3x8x1x32xf32>
        memref.store %j1f, %v[%b, %j, %c0, %d] : memref<3x8x1x32xf32>
      }
    }
  }
  %l0 = arith.constant 0 : i32
  %l1 = arith.constant 1 : i32
  %l5 = arith.constant 5 : i32
  memref.store %l0, %lens[%c0] : memref<3xi32>
  memref.store %l1, %lens[%c1] : memref<3xi32>
  memref.store %l5, %lens[%c2] : memref<3xi32>

  call @attention(%q, %k, %v, %lens, %out, %lse)
      : (memref<3x2x2x32xf32>, memref<3x8x1x32xf32>, memref<3x8x1x32xf32>,
         memref<3xi32>, memref<3x2x2x32xf32>, memref<3x2x2xf32>) -> ()

  // Dimensions 0 and 31 of each output row (all dimensions are equal).
  %ends = memref.alloc() : memref<3x2x2x2xf32>
  scf.for %b = %c0 to %c3 step %c1 {
    scf.for %t = %c0 to %c2 step %c1 {
      scf.for %h = %c0 to %c2 step %c1 {
        %first = memref.load %out[%b, %t, %h, %c0] : memref<3x2x2x32xf32>
        %c31 = arith.constant 31 : index
        %last = memref.load %out[%b, %t, %h, %c31] : memref<3x2x2x32xf32>
        memref.store %first, %ends[%b, %t, %h, %c0] : memref<3x2x2x2xf32>
        memref.store %last, %ends[%b, %t, %h, %c1] : memref<3x2x2x2xf32>
      }
    }
  }
  %ends_u = memref.cast %ends : memref<3x2x2x2xf32> to memref<*xf32>
  call @printMemrefF32(%ends_u) : (memref<*xf32>) -> ()
  // CHECK: sizes = [3, 2, 2, 2]
  // CHECK-NEXT: {{\[}}{{\[}}{{\[}}[0,   0],
  // CHECK-NEXT: [0,   0]],
  // CHECK-NEXT: {{\[}}[0,   0],
  // CHECK-NEXT: [0,   0]]],
  // CHECK-NEXT: {{\[}}{{\[}}[0,   0],
  // CHECK-NEXT: [0,   0]],
  // CHECK-NEXT: {{\[}}[1,   1],
  // CHECK-NEXT: [1,   1]]],
  // CHECK-NEXT: {{\[}}{{\[}}[3,   3],
  // CHECK-NEXT: [3,   3]],
  // CHECK-NEXT: {{\[}}[3.66667,   3.66667],
  // CHECK-NEXT: [3.66667,   3.66667]]]]

  %lse_u = memref.cast %lse : memref<3x2x2xf32> to memref<*xf32>
  call @printMemrefF32(%lse_u) : (memref<*xf32>) -> ()
  // CHECK: sizes = [3, 2, 2]
  // CHECK-NEXT: {{\[}}{{\[}}[-inf,   -inf],
  // CHECK-NEXT: [-inf,   -inf]],
  // CHECK-NEXT: {{\[}}[-inf,   -inf],
  // CHECK-NEXT: [0,   0]],
  // CHECK-NEXT: {{\[}}[2.30259,   2.30259],
  // CHECK-NEXT: [2.70805,   2.70805]]]

  memref.dealloc %q : memref<3x2x2x32xf32>
  memref.dealloc %k : memref<3x8x1x32xf32>
  memref.dealloc %v : memref<3x8x1x32xf32>
  memref.dealloc %lens : memref<3xi32>
  memref.dealloc %out : memref<3x2x2x32xf32>
  memref.dealloc %lse : memref<3x2x2xf32>
  memref.dealloc %ends : memref<3x2x2x2xf32>
  return
}

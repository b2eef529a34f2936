// fd.merge_states on the CPU end to end through mlir-runner, on states whose
// merge is computable by hand. Two operands of one state each ([T, 1, H, D],
// H = 1, D = 32, every element of a row equal), four rows:
//   row 0: lse 0 and 0, rows 1 and 3:        out 2, lse log 2 = 0.693147;
//   row 1: lse -inf (row NaN: never read) and 1, row 5: out 5, lse 1;
//   row 2: lse +inf and -inf (both empty):   out 0, lse -inf;
//   row 3: lse log 3 and 0, rows 1 and 5:    out 3/4 + 5/4 = 2, lse log 4.
// With lse_base2 the same rows but row 3's lse log2(3): out 2, lse log2 4 = 2,
// and row 0's lse log2 2 = 1. With a mask of rows 0 and 3 only, rows 1 and
// 2 keep what the output held (7 and lse 7).

// RUN: fd-opt %s -fd-lower-to-cpu | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s

func.func private @printMemrefF32(memref<*xf32>)

func.func @merge(%a: memref<4x1x1x32xf32>, %b: memref<4x1x1x32xf32>,
                 %la: memref<4x1x1xf32>, %lb: memref<4x1x1xf32>,
                 %out: memref<4x1x32xf32>, %lse: memref<4x1xf32>) {
  fd.merge_states %a, %b lses %la, %lb into %out, %lse
      : memref<4x1x1x32xf32>, memref<4x1x1x32xf32>
        lses memref<4x1x1xf32>, memref<4x1x1xf32>
        into memref<4x1x32xf32>, memref<4x1xf32>
  return
}

func.func @merge_base2(%a: memref<4x1x1x32xf32>, %b: memref<4x1x1x32xf32>,
                       %la: memref<4x1x1xf32>, %lb: memref<4x1x1xf32>,
                       %out: memref<4x1x32xf32>, %lse: memref<4x1xf32>) {
  fd.merge_states %a, %b lses %la, %lb into %out, %lse {lse_base2}
      : memref<4x1x1x32xf32>, memref<4x1x1x32xf32>
        lses memref<4x1x1xf32>, memref<4x1x1xf32>
        into memref<4x1x32xf32>, memref<4x1xf32>
  return
}

func.func @merge_masked(%a: memref<4x1x1x32xf32>, %b: memref<4x1x1x32xf32>,
                        %la: memref<4x1x1xf32>, %lb: memref<4x1x1xf32>,
                        %mask: memref<4xi8>,
                        %out: memref<4x1x32xf32>, %lse: memref<4x1xf32>) {
  fd.merge_states %a, %b lses %la, %lb mask %mask : memref<4xi8>
      into %out, %lse
      : memref<4x1x1x32xf32>, memref<4x1x1x32xf32>
        lses memref<4x1x1xf32>, memref<4x1x1xf32>
        into memref<4x1x32xf32>, memref<4x1xf32>
  return
}

// Fills row `row` of `states` with `value`, its lse with `lse`.
func.func @fill(%states: memref<4x1x1x32xf32>, %lses: memref<4x1x1xf32>,
                %row: index, %value: f32, %lse: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  scf.for %d = %c0 to %c32 step %c1 {
    memref.store %value, %states[%row, %c0, %c0, %d] : memref<4x1x1x32xf32>
  }
  memref.store %lse, %lses[%row, %c0, %c0] : memref<4x1x1xf32>
  return
}

// Prints elements 0 and 31 of each output row, then the lses.
func.func @print(%out: memref<4x1x32xf32>, %lse: memref<4x1xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c31 = arith.constant 31 : index
  %ends = memref.alloc() : memref<4x2xf32>
  scf.for %t = %c0 to %c4 step %c1 {
    %first = memref.load %out[%t, %c0, %c0] : memref<4x1x32xf32>
    %last = memref.load %out[%t, %c0, %c31] : memref<4x1x32xf32>
    memref.store %first, %ends[%t, %c0] : memref<4x2xf32>
    memref.store %last, %ends[%t, %c1] : memref<4x2xf32>
  }
  %e = memref.cast %ends : memref<4x2xf32> to memref<*xf32>
  call @printMemrefF32(%e) : (memref<*xf32>) -> ()
  %l = memref.cast %lse : memref<4x1xf32> to memref<*xf32>
  call @printMemrefF32(%l) : (memref<*xf32>) -> ()
  memref.dealloc %ends : memref<4x2xf32>
  return
}

func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %three = arith.constant 3.0 : f32
  %five = arith.constant 5.0 : f32
  %seven = arith.constant 7.0 : f32
  %nan = arith.constant 0x7FC00000 : f32
  %inf = arith.constant 0x7F800000 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %log3 = arith.constant 1.0986123 : f32
  %log2of3 = arith.constant 1.5849625 : f32
  %a = memref.alloc() : memref<4x1x1x32xf32>
  %b = memref.alloc() : memref<4x1x1x32xf32>
  %la = memref.alloc() : memref<4x1x1xf32>
  %lb = memref.alloc() : memref<4x1x1xf32>
  %out = memref.alloc() : memref<4x1x32xf32>
  %lse = memref.alloc() : memref<4x1xf32>
  call @fill(%a, %la, %c0, %one, %zero) : (memref<4x1x1x32xf32>, memref<4x1x1xf32>, index, f32, f32) -> ()
  call @fill(%b, %lb, %c0, %three, %zero) : (memref<4x1x1x32xf32>, memref<4x1x1xf32>, index, f32, f32) -> ()
  call @fill(%a, %la, %c1, %nan, %ninf) : (memref<4x1x1x32xf32>, memref<4x1x1xf32>, index, f32, f32) -> ()
  call @fill(%b, %lb, %c1, %five, %one) : (memref<4x1x1x32xf32>, memref<4x1x1xf32>, index, f32, f32) -> ()
  call @fill(%a, %la, %c2, %nan, %inf) : (memref<4x1x1x32xf32>, memref<4x1x1xf32>, index, f32, f32) -> ()
  call @fill(%b, %lb, %c2, %nan, %ninf) : (memref<4x1x1x32xf32>, memref<4x1x1xf32>, index, f32, f32) -> ()
  call @fill(%a, %la, %c3, %one, %log3) : (memref<4x1x1x32xf32>, memref<4x1x1xf32>, index, f32, f32) -> ()
  call @fill(%b, %lb, %c3, %five, %zero) : (memref<4x1x1x32xf32>, memref<4x1x1xf32>, index, f32, f32) -> ()

  call @merge(%a, %b, %la, %lb, %out, %lse)
      : (memref<4x1x1x32xf32>, memref<4x1x1x32xf32>, memref<4x1x1xf32>,
         memref<4x1x1xf32>, memref<4x1x32xf32>, memref<4x1xf32>) -> ()
  call @print(%out, %lse) : (memref<4x1x32xf32>, memref<4x1xf32>) -> ()
  // CHECK: [2,   2]
  // CHECK-NEXT: [5,   5]
  // CHECK-NEXT: [0,   0]
  // CHECK-NEXT: [2,   2]
  // CHECK: [0.693147]
  // CHECK-NEXT: [1]
  // CHECK-NEXT: [-inf]
  // CHECK-NEXT: [1.38629]

  call @fill(%a, %la, %c3, %one, %log2of3) : (memref<4x1x1x32xf32>, memref<4x1x1xf32>, index, f32, f32) -> ()
  call @merge_base2(%a, %b, %la, %lb, %out, %lse)
      : (memref<4x1x1x32xf32>, memref<4x1x1x32xf32>, memref<4x1x1xf32>,
         memref<4x1x1xf32>, memref<4x1x32xf32>, memref<4x1xf32>) -> ()
  call @print(%out, %lse) : (memref<4x1x32xf32>, memref<4x1xf32>) -> ()
  // CHECK: [2,   2]
  // CHECK-NEXT: [5,   5]
  // CHECK-NEXT: [0,   0]
  // CHECK-NEXT: [2,   2]
  // CHECK: [1]
  // CHECK-NEXT: [1]
  // CHECK-NEXT: [-inf]
  // CHECK-NEXT: [2]

  // Rows 1 and 2 masked off keep 7 and lse 7.
  %mask = memref.alloc() : memref<4xi8>
  %on = arith.constant 1 : i8
  %off = arith.constant 0 : i8
  memref.store %on, %mask[%c0] : memref<4xi8>
  memref.store %off, %mask[%c1] : memref<4xi8>
  memref.store %off, %mask[%c2] : memref<4xi8>
  memref.store %on, %mask[%c3] : memref<4xi8>
  %c4 = arith.constant 4 : index
  %c32 = arith.constant 32 : index
  scf.for %t = %c0 to %c4 step %c1 {
    scf.for %d = %c0 to %c32 step %c1 {
      memref.store %seven, %out[%t, %c0, %d] : memref<4x1x32xf32>
    }
    memref.store %seven, %lse[%t, %c0] : memref<4x1xf32>
  }
  call @fill(%a, %la, %c3, %one, %log3) : (memref<4x1x1x32xf32>, memref<4x1x1xf32>, index, f32, f32) -> ()
  call @merge_masked(%a, %b, %la, %lb, %mask, %out, %lse)
      : (memref<4x1x1x32xf32>, memref<4x1x1x32xf32>, memref<4x1x1xf32>,
         memref<4x1x1xf32>, memref<4xi8>, memref<4x1x32xf32>, memref<4x1xf32>) -> ()
  call @print(%out, %lse) : (memref<4x1x32xf32>, memref<4x1xf32>) -> ()
  // CHECK: [2,   2]
  // CHECK-NEXT: [7,   7]
  // CHECK-NEXT: [7,   7]
  // CHECK-NEXT: [2,   2]
  // CHECK: [0.693147]
  // CHECK-NEXT: [7]
  // CHECK-NEXT: [7]
  // CHECK-NEXT: [1.38629]
  return
}

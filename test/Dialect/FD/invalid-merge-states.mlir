// fd.merge_states' verifier: every message names the operand and the rule.
// RUN: fd-opt %s -split-input-file -verify-diagnostics

func.func @lses_missing(%a: memref<?x2x8x64xf16>, %b: memref<?x1x8x64xf16>, %la: memref<?x2x8xf32>,
                        %out: memref<?x8x64xf16>, %lse: memref<?x8xf32>) {
  // expected-error @below {{takes one 'state_lses' operand per 'states' operand, got 1 for 2}}
  fd.merge_states %a, %b lses %la into %out, %lse : memref<?x2x8x64xf16>, memref<?x1x8x64xf16> lses memref<?x2x8xf32> into memref<?x8x64xf16>, memref<?x8xf32>
  return
}

// -----

func.func @no_states(%out: memref<?x8x64xf16>, %lse: memref<?x8xf32>) {
  // expected-error @below {{needs at least one 'states' operand}}
  "fd.merge_states"(%out, %lse) {operandSegmentSizes = array<i32: 0, 0, 1, 1, 0>} : (memref<?x8x64xf16>, memref<?x8xf32>) -> ()
  return
}

// -----

func.func @element_type_differs(%a: memref<?x2x8x64xbf16>, %la: memref<?x2x8xf32>,
                                %out: memref<?x8x64xf16>, %lse: memref<?x8xf32>) {
  // expected-error @below {{'states #0' must be [T, N, H, D] with the output's T, H, D and element type [?, 2, 8, 64] of 'f16', got 'memref<?x2x8x64xbf16>'}}
  fd.merge_states %a lses %la into %out, %lse : memref<?x2x8x64xbf16> lses memref<?x2x8xf32> into memref<?x8x64xf16>, memref<?x8xf32>
  return
}

// -----

func.func @heads_differ(%a: memref<?x2x8x64xf16>, %b: memref<?x1x4x64xf16>,
                        %la: memref<?x2x8xf32>, %lb: memref<?x1x4xf32>,
                        %out: memref<?x8x64xf16>, %lse: memref<?x8xf32>) {
  // expected-error @below {{'states #1' must be [T, N, H, D] with the output's T, H, D and element type [?, 1, 8, 64] of 'f16', got 'memref<?x1x4x64xf16>'}}
  fd.merge_states %a, %b lses %la, %lb into %out, %lse : memref<?x2x8x64xf16>, memref<?x1x4x64xf16> lses memref<?x2x8xf32>, memref<?x1x4xf32> into memref<?x8x64xf16>, memref<?x8xf32>
  return
}

// -----

func.func @rows_differ(%a: memref<4x2x8x64xf16>, %la: memref<4x2x8xf32>,
                       %out: memref<5x8x64xf16>, %lse: memref<5x8xf32>) {
  // expected-error @below {{'states #0' must be [T, N, H, D] with the output's T, H, D and element type [5, 2, 8, 64] of 'f16', got 'memref<4x2x8x64xf16>'}}
  fd.merge_states %a lses %la into %out, %lse : memref<4x2x8x64xf16> lses memref<4x2x8xf32> into memref<5x8x64xf16>, memref<5x8xf32>
  return
}

// -----

func.func @dynamic_state_count(%a: memref<?x?x8x64xf16>, %la: memref<?x?x8xf32>,
                               %out: memref<?x8x64xf16>, %lse: memref<?x8xf32>) {
  // expected-error @below {{'states #0' must have a static number of states (its second dimension, at least 1), got 'memref<?x?x8x64xf16>'}}
  fd.merge_states %a lses %la into %out, %lse : memref<?x?x8x64xf16> lses memref<?x?x8xf32> into memref<?x8x64xf16>, memref<?x8xf32>
  return
}

// -----

func.func @lse_count_differs(%a: memref<?x2x8x64xf16>, %la: memref<?x3x8xf32>,
                             %out: memref<?x8x64xf16>, %lse: memref<?x8xf32>) {
  // expected-error @below {{'state_lses #0' must be [T, N, H] matching 'states #0' [?, 2, 8] of 'f32', got 'memref<?x3x8xf32>'}}
  fd.merge_states %a lses %la into %out, %lse : memref<?x2x8x64xf16> lses memref<?x3x8xf32> into memref<?x8x64xf16>, memref<?x8xf32>
  return
}

// -----

func.func @head_dim_20(%a: memref<?x2x8x20xf16>, %la: memref<?x2x8xf32>,
                       %out: memref<?x8x20xf16>, %lse: memref<?x8xf32>) {
  // expected-error @below {{'output' head dim [20] is not supported: expected a static multiple of 8 in [32, 512]}}
  fd.merge_states %a lses %la into %out, %lse : memref<?x2x8x20xf16> lses memref<?x2x8xf32> into memref<?x8x20xf16>, memref<?x8xf32>
  return
}

// -----

func.func @dynamic_heads(%a: memref<?x2x?x64xf16>, %la: memref<?x2x?xf32>,
                         %out: memref<?x?x64xf16>, %lse: memref<?x?xf32>) {
  // expected-error @below {{'output' must have a static head count (its second dimension), got 'memref<?x?x64xf16>'}}
  fd.merge_states %a lses %la into %out, %lse : memref<?x2x?x64xf16> lses memref<?x2x?xf32> into memref<?x?x64xf16>, memref<?x?xf32>
  return
}

// -----

func.func @lse_shape(%a: memref<?x2x8x64xf16>, %la: memref<?x2x8xf32>,
                     %out: memref<?x8x64xf16>, %lse: memref<?x4xf32>) {
  // expected-error @below {{'lse' must be [T, H] matching 'output' [?, 8] of 'f32', got 'memref<?x4xf32>'}}
  fd.merge_states %a lses %la into %out, %lse : memref<?x2x8x64xf16> lses memref<?x2x8xf32> into memref<?x8x64xf16>, memref<?x4xf32>
  return
}

// -----

func.func @mask_rows(%a: memref<16x2x8x64xf16>, %la: memref<16x2x8xf32>,
                     %out: memref<16x8x64xf16>, %lse: memref<16x8xf32>, %mask: memref<8xi8>) {
  // expected-error @below {{'mask' must be one flag per row, [T] [16] of 'i8', got 'memref<8xi8>'}}
  fd.merge_states %a lses %la mask %mask : memref<8xi8> into %out, %lse : memref<16x2x8x64xf16> lses memref<16x2x8xf32> into memref<16x8x64xf16>, memref<16x8xf32>
  return
}

// -----

func.func @mask_type(%a: memref<16x2x8x64xf16>, %la: memref<16x2x8xf32>,
                     %out: memref<16x8x64xf16>, %lse: memref<16x8xf32>, %mask: memref<16xi32>) {
  // expected-error @below {{operand #4 must be 1D memref of 8-bit signless integer values, but got 'memref<16xi32>'}}
  fd.merge_states %a lses %la mask %mask : memref<16xi32> into %out, %lse : memref<16x2x8x64xf16> lses memref<16x2x8xf32> into memref<16x8x64xf16>, memref<16x8xf32>
  return
}

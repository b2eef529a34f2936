// RUN: fd-opt %s -split-input-file -verify-diagnostics

func.func @element_types_differ(%q: memref<1x8x64xf16>, %k: memref<1x?x8x64xf32>, %v: memref<1x?x8x64xf32>, %l: memref<1xi32>, %o: memref<1x8x64xf16>) {
  // expected-error @below {{'key_cache' element type 'f32' must match 'query' element type 'f16'}}
  fd.attention %q, %k, %v, %l into %o : memref<1x8x64xf16>, memref<1x?x8x64xf32>, memref<1x?x8x64xf32>, memref<1xi32> into memref<1x8x64xf16>
  return
}

// -----

func.func @value_type_differs(%q: memref<1x8x64xf16>, %k: memref<1x?x8x64xf16>, %v: memref<1x?x8x64xbf16>, %l: memref<1xi32>, %o: memref<1x8x64xf16>) {
  // expected-error @below {{'value_cache' element type 'bf16' must match 'query' element type 'f16'}}
  fd.attention %q, %k, %v, %l into %o : memref<1x8x64xf16>, memref<1x?x8x64xf16>, memref<1x?x8x64xbf16>, memref<1xi32> into memref<1x8x64xf16>
  return
}

// -----

func.func @head_dim_100(%q: memref<1x8x100xf16>, %k: memref<1x?x8x100xf16>, %v: memref<1x?x8x100xf16>, %l: memref<1xi32>, %o: memref<1x8x100xf16>) {
  // expected-error @below {{'query' head dim [100] is not supported: expected a static multiple of 8 in [32, 576]}}
  fd.attention %q, %k, %v, %l into %o : memref<1x8x100xf16>, memref<1x?x8x100xf16>, memref<1x?x8x100xf16>, memref<1xi32> into memref<1x8x100xf16>
  return
}

// -----

func.func @head_dim_dynamic(%q: memref<1x8x?xf16>, %k: memref<1x?x8x?xf16>, %v: memref<1x?x8x?xf16>, %l: memref<1xi32>, %o: memref<1x8x?xf16>) {
  // expected-error @below {{'query' head dim [?] is not supported: expected a static multiple of 8 in [32, 576]}}
  fd.attention %q, %k, %v, %l into %o : memref<1x8x?xf16>, memref<1x?x8x?xf16>, memref<1x?x8x?xf16>, memref<1xi32> into memref<1x8x?xf16>
  return
}

// -----

func.func @head_dim_584(%q: memref<1x8x584xf16>, %k: memref<1x?x8x584xf16>, %v: memref<1x?x8x512xf16>, %l: memref<1xi32>, %o: memref<1x8x512xf16>) {
  // expected-error @below {{'query' head dim [584] is not supported}}
  fd.attention %q, %k, %v, %l into %o : memref<1x8x584xf16>, memref<1x?x8x584xf16>, memref<1x?x8x512xf16>, memref<1xi32> into memref<1x8x512xf16>
  return
}

// -----

func.func @dynamic_query_heads(%q: memref<1x?x64xf16>, %k: memref<1x?x8x64xf16>, %v: memref<1x?x8x64xf16>, %l: memref<1xi32>, %o: memref<1x?x64xf16>) {
  // expected-error @below {{'query' head count (Hq) must be static and >= 1}}
  fd.attention %q, %k, %v, %l into %o : memref<1x?x64xf16>, memref<1x?x8x64xf16>, memref<1x?x8x64xf16>, memref<1xi32> into memref<1x?x64xf16>
  return
}

// -----

func.func @dynamic_query_length(%q: memref<1x?x8x64xf16>, %k: memref<1x?x8x64xf16>, %v: memref<1x?x8x64xf16>, %l: memref<1xi32>, %o: memref<1x?x8x64xf16>) {
  // expected-error @below {{'query' token count (Lq) must be static and >= 1}}
  fd.attention %q, %k, %v, %l into %o : memref<1x?x8x64xf16>, memref<1x?x8x64xf16>, memref<1x?x8x64xf16>, memref<1xi32> into memref<1x?x8x64xf16>
  return
}

// -----

func.func @caches_differ(%q: memref<1x8x64xf16>, %k: memref<1x16x8x64xf16>, %v: memref<1x32x8x64xf16>, %l: memref<1xi32>, %o: memref<1x8x64xf16>) {
  // expected-error @below {{'value_cache' shape [1, 32, 8, 64] must be the 'key_cache' shape with the value head dim (D_v, of 'output') last: [1, 16, 8, 64]}}
  fd.attention %q, %k, %v, %l into %o : memref<1x8x64xf16>, memref<1x16x8x64xf16>, memref<1x32x8x64xf16>, memref<1xi32> into memref<1x8x64xf16>
  return
}

// -----

func.func @dynamic_kv_heads(%q: memref<1x8x64xf16>, %k: memref<1x?x?x64xf16>, %v: memref<1x?x?x64xf16>, %l: memref<1xi32>, %o: memref<1x8x64xf16>) {
  // expected-error @below {{'key_cache' KV head count (Hkv) must be static and >= 1 in the layout [B, Lmax, Hkv, D] (NHD), got [1, ?, ?, 64]}}
  fd.attention %q, %k, %v, %l into %o : memref<1x8x64xf16>, memref<1x?x?x64xf16>, memref<1x?x?x64xf16>, memref<1xi32> into memref<1x8x64xf16>
  return
}

// -----

func.func @cache_head_dim(%q: memref<1x8x64xf16>, %k: memref<1x?x8x128xf16>, %v: memref<1x?x8x128xf16>, %l: memref<1xi32>, %o: memref<1x8x64xf16>) {
  // expected-error @below {{'key_cache' head dim [128] must equal the 'query' head dim 64}}
  fd.attention %q, %k, %v, %l into %o : memref<1x8x64xf16>, memref<1x?x8x128xf16>, memref<1x?x8x128xf16>, memref<1xi32> into memref<1x8x64xf16>
  return
}

// -----

func.func @head_ratio(%q: memref<1x30x64xf16>, %k: memref<1x?x8x64xf16>, %v: memref<1x?x8x64xf16>, %l: memref<1xi32>, %o: memref<1x30x64xf16>) {
  // expected-error @below {{query heads (Hq = 30) must be a multiple of KV heads (Hkv = 8) in 'key_cache' of layout [B, Lmax, Hkv, D] (NHD)}}
  fd.attention %q, %k, %v, %l into %o : memref<1x30x64xf16>, memref<1x?x8x64xf16>, memref<1x?x8x64xf16>, memref<1xi32> into memref<1x30x64xf16>
  return
}

// -----

func.func @hnd_layout_is_checked(%q: memref<1x8x64xf16>, %k: memref<1x?x8x64xf16>, %v: memref<1x?x8x64xf16>, %l: memref<1xi32>, %o: memref<1x8x64xf16>) {
  // In HND the KV heads are dimension 1, dynamic here.
  // expected-error @below {{'key_cache' KV head count (Hkv) must be static and >= 1 in the layout [B, Hkv, Lmax, D] (HND)}}
  fd.attention %q, %k, %v, %l into %o {kv_layout = #fd.kv_layout<HND>} : memref<1x8x64xf16>, memref<1x?x8x64xf16>, memref<1x?x8x64xf16>, memref<1xi32> into memref<1x8x64xf16>
  return
}

// -----

func.func @batch_mismatch(%q: memref<2x8x64xf16>, %k: memref<3x?x8x64xf16>, %v: memref<3x?x8x64xf16>, %l: memref<2xi32>, %o: memref<2x8x64xf16>) {
  // expected-error @below {{'key_cache' batch size [3] does not match the 'query' batch size [2]}}
  fd.attention %q, %k, %v, %l into %o : memref<2x8x64xf16>, memref<3x?x8x64xf16>, memref<3x?x8x64xf16>, memref<2xi32> into memref<2x8x64xf16>
  return
}

// -----

func.func @lengths_mismatch(%q: memref<2x8x64xf16>, %k: memref<2x?x8x64xf16>, %v: memref<2x?x8x64xf16>, %l: memref<3xi32>, %o: memref<2x8x64xf16>) {
  // expected-error @below {{'seq_lens' must have one length per sequence: size [3] but the batch size is [2]}}
  fd.attention %q, %k, %v, %l into %o : memref<2x8x64xf16>, memref<2x?x8x64xf16>, memref<2x?x8x64xf16>, memref<3xi32> into memref<2x8x64xf16>
  return
}

// -----

func.func @output_shape(%q: memref<1x8x64xf16>, %k: memref<1x?x8x64xf16>, %v: memref<1x?x8x64xf16>, %l: memref<1xi32>, %o: memref<1x8x64xf32>) {
  // expected-error @below {{'output' must be shaped like 'query' with D_v last, [1, 8, 64] of 'f16', got 'memref<1x8x64xf32>'}}
  fd.attention %q, %k, %v, %l into %o : memref<1x8x64xf16>, memref<1x?x8x64xf16>, memref<1x?x8x64xf16>, memref<1xi32> into memref<1x8x64xf32>
  return
}

// -----

func.func @lse_shape(%q: memref<1x8x64xf16>, %k: memref<1x?x8x64xf16>, %v: memref<1x?x8x64xf16>, %l: memref<1xi32>, %o: memref<1x8x64xf16>, %lse: memref<1x4xf32>) {
  // expected-error @below {{'lse' must be [B, (Lq,) Hq] [1, 8] of 'f32', got 'memref<1x4xf32>'}}
  fd.attention %q, %k, %v, %l into %o, %lse : memref<1x8x64xf16>, memref<1x?x8x64xf16>, memref<1x?x8x64xf16>, memref<1xi32> into memref<1x8x64xf16>, memref<1x4xf32>
  return
}

// -----

func.func @scale_negative(%q: memref<1x8x64xf16>, %k: memref<1x?x8x64xf16>, %v: memref<1x?x8x64xf16>, %l: memref<1xi32>, %o: memref<1x8x64xf16>) {
  // expected-error @below {{'scale' must be a positive finite number, got -1}}
  fd.attention %q, %k, %v, %l into %o {scale = -1.0 : f32} : memref<1x8x64xf16>, memref<1x?x8x64xf16>, memref<1x?x8x64xf16>, memref<1xi32> into memref<1x8x64xf16>
  return
}

// -----

func.func @query_rank(%q: memref<8x64xf16>, %k: memref<1x?x8x64xf16>, %v: memref<1x?x8x64xf16>, %l: memref<1xi32>, %o: memref<8x64xf16>) {
  // expected-error @below {{operand #0 must be 3D/4D memref of 16-bit float or bfloat16 type or 32-bit float values}}
  fd.attention %q, %k, %v, %l into %o : memref<8x64xf16>, memref<1x?x8x64xf16>, memref<1x?x8x64xf16>, memref<1xi32> into memref<8x64xf16>
  return
}

// -----

func.func @lengths_type(%q: memref<1x8x64xf16>, %k: memref<1x?x8x64xf16>, %v: memref<1x?x8x64xf16>, %l: memref<1xi64>, %o: memref<1x8x64xf16>) {
  // expected-error @below {{operand #3 must be 1D memref of 32-bit signless integer values}}
  fd.attention %q, %k, %v, %l into %o : memref<1x8x64xf16>, memref<1x?x8x64xf16>, memref<1x?x8x64xf16>, memref<1xi64> into memref<1x8x64xf16>
  return
}

// -----

func.func @partial_dynamic_splits(%q: memref<1x8x64xf16>, %k: memref<1x?x8x64xf16>, %v: memref<1x?x8x64xf16>, %l: memref<1xi32>, %po: memref<1x8x?x64xf32>, %pl: memref<1x8x?xf32>) {
  // expected-error @below {{'partial_output' split count (S, the dimension before D) must be static and >= 1, got [1, 8, ?, 64]}}
  fd.partial_attention %q, %k, %v, %l into %po, %pl : memref<1x8x64xf16>, memref<1x?x8x64xf16>, memref<1x?x8x64xf16>, memref<1xi32> into memref<1x8x?x64xf32>, memref<1x8x?xf32>
  return
}

// -----

func.func @partial_output_shape(%q: memref<1x8x64xf16>, %k: memref<1x?x8x64xf16>, %v: memref<1x?x8x64xf16>, %l: memref<1xi32>, %po: memref<1x4x4x64xf32>, %pl: memref<1x8x4xf32>) {
  // expected-error @below {{'partial_output' must be [B, (Lq,) Hq, S, D_v] [1, 8, 4, 64] of 'f32', got 'memref<1x4x4x64xf32>'}}
  fd.partial_attention %q, %k, %v, %l into %po, %pl : memref<1x8x64xf16>, memref<1x?x8x64xf16>, memref<1x?x8x64xf16>, memref<1xi32> into memref<1x4x4x64xf32>, memref<1x8x4xf32>
  return
}

// -----

func.func @partial_lse_shape(%q: memref<1x8x64xf16>, %k: memref<1x?x8x64xf16>, %v: memref<1x?x8x64xf16>, %l: memref<1xi32>, %po: memref<1x8x4x64xf32>, %pl: memref<1x8x2xf32>) {
  // expected-error @below {{'partial_lse' must be [B, (Lq,) Hq, S] [1, 8, 4] of 'f32', got 'memref<1x8x2xf32>'}}
  fd.partial_attention %q, %k, %v, %l into %po, %pl : memref<1x8x64xf16>, memref<1x?x8x64xf16>, memref<1x?x8x64xf16>, memref<1xi32> into memref<1x8x4x64xf32>, memref<1x8x2xf32>
  return
}

// -----

func.func @partial_chunk_length(%q: memref<1x8x64xf16>, %k: memref<1x?x8x64xf16>, %v: memref<1x?x8x64xf16>, %l: memref<1xi32>, %po: memref<1x8x4x64xf32>, %pl: memref<1x8x4xf32>) {
  // expected-error @below {{attribute 'chunk_length' failed to satisfy constraint}}
  fd.partial_attention %q, %k, %v, %l into %po, %pl {chunk_length = 0 : i64} : memref<1x8x64xf16>, memref<1x?x8x64xf16>, memref<1x?x8x64xf16>, memref<1xi32> into memref<1x8x4x64xf32>, memref<1x8x4xf32>
  return
}

// -----

func.func @merge_lse_shape(%po: memref<1x8x4x64xf32>, %pl: memref<1x8x3xf32>, %o: memref<1x8x64xf16>) {
  // expected-error @below {{'partial_lse' must be [B, (Lq,) Hq, S] matching 'partial_output' [1, 8, 4] of 'f32', got 'memref<1x8x3xf32>'}}
  fd.merge %po, %pl into %o : memref<1x8x4x64xf32>, memref<1x8x3xf32> into memref<1x8x64xf16>
  return
}

// -----

func.func @merge_output_shape(%po: memref<1x8x4x64xf32>, %pl: memref<1x8x4xf32>, %o: memref<1x8x128xf16>) {
  // expected-error @below {{'output' must be [B, (Lq,) Hq, D] matching 'partial_output' [1, 8, 64] of 'f16', got 'memref<1x8x128xf16>'}}
  fd.merge %po, %pl into %o : memref<1x8x4x64xf32>, memref<1x8x4xf32> into memref<1x8x128xf16>
  return
}

// -----

func.func @merge_head_dim(%po: memref<1x8x4x12xf32>, %pl: memref<1x8x4xf32>, %o: memref<1x8x12xf16>) {
  // expected-error @below {{'partial_output' head dim [12] is not supported: expected a static multiple of 8 in [32, 512]}}
  fd.merge %po, %pl into %o : memref<1x8x4x12xf32>, memref<1x8x4xf32> into memref<1x8x12xf16>
  return
}

// -----

func.func @merge_partials_f16(%po: memref<1x8x4x64xf16>, %pl: memref<1x8x4xf32>, %o: memref<1x8x64xf16>) {
  // expected-error @below {{operand #0 must be 4D/5D memref of 32-bit float values}}
  fd.merge %po, %pl into %o : memref<1x8x4x64xf16>, memref<1x8x4xf32> into memref<1x8x64xf16>
  return
}

// -----

func.func @page_size_not_power_of_two(%q: memref<2x8x64xf16>, %k: memref<9x24x2x64xf16>, %v: memref<9x24x2x64xf16>, %l: memref<2xi32>, %t: memref<2x4xi32>, %o: memref<2x8x64xf16>) {
  // expected-error @below {{paged 'key_cache' page size [24] is not supported: expected a static power of two from 1 to 256 in the layout [num_pages, page_size, Hkv, D] (paged NHD)}}
  fd.attention %q, %k, %v, %l block_table %t : memref<2x4xi32> into %o : memref<2x8x64xf16>, memref<9x24x2x64xf16>, memref<9x24x2x64xf16>, memref<2xi32> into memref<2x8x64xf16>
  return
}

// -----

func.func @page_size_too_large(%q: memref<2x8x64xf16>, %k: memref<9x2x512x64xf16>, %v: memref<9x2x512x64xf16>, %l: memref<2xi32>, %t: memref<2x4xi32>, %o: memref<2x8x64xf16>) {
  // expected-error @below {{paged 'key_cache' page size [512] is not supported: expected a static power of two from 1 to 256 in the layout [num_pages, Hkv, page_size, D] (paged HND)}}
  fd.attention %q, %k, %v, %l block_table %t : memref<2x4xi32> into %o {kv_layout = #fd.kv_layout<HND>} : memref<2x8x64xf16>, memref<9x2x512x64xf16>, memref<9x2x512x64xf16>, memref<2xi32> into memref<2x8x64xf16>
  return
}

// -----

func.func @page_size_dynamic(%q: memref<2x8x64xf16>, %k: memref<9x?x2x64xf16>, %v: memref<9x?x2x64xf16>, %l: memref<2xi32>, %t: memref<2x4xi32>, %o: memref<2x8x64xf16>) {
  // expected-error @below {{paged 'key_cache' page size [?] is not supported}}
  fd.attention %q, %k, %v, %l block_table %t : memref<2x4xi32> into %o : memref<2x8x64xf16>, memref<9x?x2x64xf16>, memref<9x?x2x64xf16>, memref<2xi32> into memref<2x8x64xf16>
  return
}

// -----

func.func @block_table_rows(%q: memref<2x8x64xf16>, %k: memref<9x16x2x64xf16>, %v: memref<9x16x2x64xf16>, %l: memref<2xi32>, %t: memref<3x4xi32>, %o: memref<2x8x64xf16>) {
  // expected-error @below {{'block_table' must have one row per sequence: [3] rows but the 'query' batch size is [2]}}
  fd.attention %q, %k, %v, %l block_table %t : memref<3x4xi32> into %o : memref<2x8x64xf16>, memref<9x16x2x64xf16>, memref<9x16x2x64xf16>, memref<2xi32> into memref<2x8x64xf16>
  return
}

// -----

func.func @block_table_type(%q: memref<2x8x64xf16>, %k: memref<9x16x2x64xf16>, %v: memref<9x16x2x64xf16>, %l: memref<2xi32>, %t: memref<2x4xi64>, %o: memref<2x8x64xf16>) {
  // expected-error @below {{operand #4 must be 2D memref of 32-bit signless integer values}}
  fd.attention %q, %k, %v, %l block_table %t : memref<2x4xi64> into %o : memref<2x8x64xf16>, memref<9x16x2x64xf16>, memref<9x16x2x64xf16>, memref<2xi32> into memref<2x8x64xf16>
  return
}

// -----

func.func @window_zero(%q: memref<1x8x64xf16>, %k: memref<1x?x8x64xf16>, %v: memref<1x?x8x64xf16>, %l: memref<1xi32>, %o: memref<1x8x64xf16>) {
  // expected-error @below {{'window_left' must be >= 1 (a query sees itself and the window_left - 1 keys before it), got 0}}
  fd.attention %q, %k, %v, %l into %o {window_left = 0} : memref<1x8x64xf16>, memref<1x?x8x64xf16>, memref<1x?x8x64xf16>, memref<1xi32> into memref<1x8x64xf16>
  return
}

// -----

func.func @window_negative_partial(%q: memref<1x8x64xf16>, %k: memref<1x?x8x64xf16>, %v: memref<1x?x8x64xf16>, %l: memref<1xi32>, %po: memref<1x8x2x64xf32>, %pl: memref<1x8x2xf32>) {
  // expected-error @below {{'window_left' must be >= 1 (a query sees itself and the window_left - 1 keys before it), got -5}}
  fd.partial_attention %q, %k, %v, %l into %po, %pl {window_left = -5} : memref<1x8x64xf16>, memref<1x?x8x64xf16>, memref<1x?x8x64xf16>, memref<1xi32> into memref<1x8x2x64xf32>, memref<1x8x2xf32>
  return
}

// -----

func.func @soft_cap_zero(%q: memref<1x8x64xf16>, %k: memref<1x?x8x64xf16>, %v: memref<1x?x8x64xf16>, %l: memref<1xi32>, %o: memref<1x8x64xf16>) {
  // expected-error @below {{'logits_soft_cap' must be a positive finite number, got 0}}
  fd.attention %q, %k, %v, %l into %o {logits_soft_cap = 0.0 : f32} : memref<1x8x64xf16>, memref<1x?x8x64xf16>, memref<1x?x8x64xf16>, memref<1xi32> into memref<1x8x64xf16>
  return
}

// -----

func.func @soft_cap_infinite(%q: memref<1x8x64xf16>, %k: memref<1x?x8x64xf16>, %v: memref<1x?x8x64xf16>, %l: memref<1xi32>, %po: memref<1x8x2x64xf32>, %pl: memref<1x8x2xf32>) {
  // expected-error @below {{'logits_soft_cap' must be a positive finite number, got INF}}
  fd.partial_attention %q, %k, %v, %l into %po, %pl {logits_soft_cap = 0x7F800000 : f32} : memref<1x8x64xf16>, memref<1x?x8x64xf16>, memref<1x?x8x64xf16>, memref<1xi32> into memref<1x8x2x64xf32>, memref<1x8x2xf32>
  return
}

// -----

func.func @sinks_shape(%q: memref<1x8x64xf16>, %k: memref<1x?x8x64xf16>, %v: memref<1x?x8x64xf16>, %l: memref<1xi32>, %s: memref<4xf32>, %o: memref<1x8x64xf16>) {
  // expected-error @below {{'sinks' must be one logit per query head, [Hq] [8] of 'f32', got 'memref<4xf32>'}}
  fd.attention %q, %k, %v, %l sinks %s : memref<4xf32> into %o : memref<1x8x64xf16>, memref<1x?x8x64xf16>, memref<1x?x8x64xf16>, memref<1xi32> into memref<1x8x64xf16>
  return
}

// -----

func.func @merge_sinks_shape(%po: memref<1x8x2x64xf32>, %pl: memref<1x8x2xf32>, %s: memref<16xf32>, %o: memref<1x8x64xf16>) {
  // expected-error @below {{'sinks' must be one logit per query head, [Hq] [8] of 'f32', got 'memref<16xf32>'}}
  fd.merge %po, %pl sinks %s : memref<16xf32> into %o : memref<1x8x2x64xf32>, memref<1x8x2xf32> into memref<1x8x64xf16>
  return
}

// -----

func.func @sinks_type(%q: memref<1x8x64xf16>, %k: memref<1x?x8x64xf16>, %v: memref<1x?x8x64xf16>, %l: memref<1xi32>, %s: memref<8xf16>, %o: memref<1x8x64xf16>) {
  // expected-error @below {{operand #5 must be 1D memref of 32-bit float values}}
  fd.attention %q, %k, %v, %l sinks %s : memref<8xf16> into %o : memref<1x8x64xf16>, memref<1x?x8x64xf16>, memref<1x?x8x64xf16>, memref<1xi32> into memref<1x8x64xf16>
  return
}

// -----

func.func @alibi_shape(%q: memref<1x8x64xf16>, %k: memref<1x?x8x64xf16>, %v: memref<1x?x8x64xf16>, %l: memref<1xi32>, %a: memref<4xf32>, %o: memref<1x8x64xf16>) {
  // expected-error @below {{'alibi_slopes' must be one slope per query head, [Hq] [8] of 'f32', got 'memref<4xf32>'}}
  fd.attention %q, %k, %v, %l alibi_slopes %a : memref<4xf32> into %o : memref<1x8x64xf16>, memref<1x?x8x64xf16>, memref<1x?x8x64xf16>, memref<1xi32> into memref<1x8x64xf16>
  return
}

// -----

func.func @alibi_shape_partial(%q: memref<1x8x64xf16>, %k: memref<1x?x8x64xf16>, %v: memref<1x?x8x64xf16>, %l: memref<1xi32>, %a: memref<16xf32>, %po: memref<1x8x2x64xf32>, %pl: memref<1x8x2xf32>) {
  // expected-error @below {{'alibi_slopes' must be one slope per query head, [Hq] [8] of 'f32', got 'memref<16xf32>'}}
  fd.partial_attention %q, %k, %v, %l alibi_slopes %a : memref<16xf32> into %po, %pl : memref<1x8x64xf16>, memref<1x?x8x64xf16>, memref<1x?x8x64xf16>, memref<1xi32> into memref<1x8x2x64xf32>, memref<1x8x2xf32>
  return
}

// -----

func.func @query_lens_size(%q: memref<2x4x8x64xf16>, %k: memref<2x?x8x64xf16>, %v: memref<2x?x8x64xf16>, %l: memref<2xi32>, %ql: memref<3xi32>, %o: memref<2x4x8x64xf16>) {
  // expected-error @below {{'query_lens' must have one query length per sequence: size [3] but the batch size is [2]}}
  fd.attention %q, %k, %v, %l query_lens %ql : memref<3xi32> into %o : memref<2x4x8x64xf16>, memref<2x?x8x64xf16>, memref<2x?x8x64xf16>, memref<2xi32> into memref<2x4x8x64xf16>
  return
}

// -----

func.func @query_lens_size_partial(%q: memref<2x4x8x64xf16>, %k: memref<2x?x8x64xf16>, %v: memref<2x?x8x64xf16>, %l: memref<2xi32>, %ql: memref<1xi32>, %po: memref<2x4x8x2x64xf32>, %pl: memref<2x4x8x2xf32>) {
  // expected-error @below {{'query_lens' must have one query length per sequence: size [1] but the batch size is [2]}}
  fd.partial_attention %q, %k, %v, %l query_lens %ql : memref<1xi32> into %po, %pl : memref<2x4x8x64xf16>, memref<2x?x8x64xf16>, memref<2x?x8x64xf16>, memref<2xi32> into memref<2x4x8x2x64xf32>, memref<2x4x8x2xf32>
  return
}

// -----

func.func @query_lens_size_merge(%po: memref<2x4x8x2x64xf32>, %pl: memref<2x4x8x2xf32>, %ql: memref<4xi32>, %o: memref<2x4x8x64xf16>) {
  // expected-error @below {{'query_lens' must have one query length per sequence: size [4] but the batch size is [2]}}
  fd.merge %po, %pl query_lens %ql : memref<4xi32> into %o : memref<2x4x8x2x64xf32>, memref<2x4x8x2xf32> into memref<2x4x8x64xf16>
  return
}

// -----

func.func @query_lens_type(%q: memref<1x4x8x64xf16>, %k: memref<1x?x8x64xf16>, %v: memref<1x?x8x64xf16>, %l: memref<1xi32>, %ql: memref<1xi64>, %o: memref<1x4x8x64xf16>) {
  // expected-error @below {{operand #4 must be 1D memref of 32-bit signless integer values}}
  fd.attention %q, %k, %v, %l query_lens %ql : memref<1xi64> into %o : memref<1x4x8x64xf16>, memref<1x?x8x64xf16>, memref<1x?x8x64xf16>, memref<1xi32> into memref<1x4x8x64xf16>
  return
}

// -----

func.func @query_lens_rank(%po: memref<1x4x8x2x64xf32>, %pl: memref<1x4x8x2xf32>, %ql: memref<1x1xi32>, %o: memref<1x4x8x64xf16>) {
  // expected-error @below {{operand #3 must be 1D memref of 32-bit signless integer values}}
  fd.merge %po, %pl query_lens %ql : memref<1x1xi32> into %o : memref<1x4x8x2x64xf32>, memref<1x4x8x2xf32> into memref<1x4x8x64xf16>
  return
}

// -----

func.func @fp8_without_scales(%q: memref<1x8x64xf16>, %k: memref<1x?x2x64xf8E4M3FN>, %v: memref<1x?x2x64xf8E4M3FN>, %l: memref<1xi32>, %o: memref<1x8x64xf16>) {
  // expected-error @below {{an fp8 'key_cache' ('f8E4M3FN') needs 'k_scale': [1] (per tensor) or [1, ?, 2] (per token and KV head, the cache's shape without the head dim) of f32}}
  fd.attention %q, %k, %v, %l into %o : memref<1x8x64xf16>, memref<1x?x2x64xf8E4M3FN>, memref<1x?x2x64xf8E4M3FN>, memref<1xi32> into memref<1x8x64xf16>
  return
}

// -----

func.func @fp8_without_value_scale(%q: memref<1x8x64xf16>, %k: memref<1x?x2x64xf8E5M2>, %v: memref<1x?x2x64xf8E5M2>, %l: memref<1xi32>, %ks: memref<1xf32>, %po: memref<1x8x4x64xf32>, %pl: memref<1x8x4xf32>) {
  // expected-error @below {{an fp8 'key_cache' ('f8E5M2') needs 'v_scale'}}
  fd.partial_attention %q, %k, %v, %l k_scale %ks : memref<1xf32> into %po, %pl : memref<1x8x64xf16>, memref<1x?x2x64xf8E5M2>, memref<1x?x2x64xf8E5M2>, memref<1xi32> into memref<1x8x4x64xf32>, memref<1x8x4xf32>
  return
}

// -----

func.func @scale_on_f16_cache(%q: memref<1x8x64xf16>, %k: memref<1x?x2x64xf16>, %v: memref<1x?x2x64xf16>, %l: memref<1xi32>, %ks: memref<1xf32>, %o: memref<1x8x64xf16>) {
  // expected-error @below {{'k_scale' applies to fp8 caches only, but 'key_cache' holds 'f16'}}
  fd.attention %q, %k, %v, %l k_scale %ks : memref<1xf32> into %o : memref<1x8x64xf16>, memref<1x?x2x64xf16>, memref<1x?x2x64xf16>, memref<1xi32> into memref<1x8x64xf16>
  return
}

// -----

func.func @fp8_mixed_formats(%q: memref<1x8x64xf16>, %k: memref<1x?x2x64xf8E4M3FN>, %v: memref<1x?x2x64xf8E5M2>, %l: memref<1xi32>, %s: memref<1xf32>, %o: memref<1x8x64xf16>) {
  // expected-error @below {{'value_cache' element type 'f8E5M2' must match 'key_cache' element type 'f8E4M3FN'}}
  fd.attention %q, %k, %v, %l k_scale %s : memref<1xf32> v_scale %s : memref<1xf32> into %o : memref<1x8x64xf16>, memref<1x?x2x64xf8E4M3FN>, memref<1x?x2x64xf8E5M2>, memref<1xi32> into memref<1x8x64xf16>
  return
}

// -----

func.func @fp8_scale_shape(%q: memref<1x8x64xf16>, %k: memref<1x?x2x64xf8E4M3FN>, %v: memref<1x?x2x64xf8E4M3FN>, %l: memref<1xi32>, %ks: memref<1x?x4xf32>, %vs: memref<1xf32>, %o: memref<1x8x64xf16>) {
  // expected-error @below {{'k_scale' must be [1] (per tensor) or [1, ?, 2] (per token and KV head, the cache's shape without the head dim) of f32, got 'memref<1x?x4xf32>'}}
  fd.attention %q, %k, %v, %l k_scale %ks : memref<1x?x4xf32> v_scale %vs : memref<1xf32> into %o : memref<1x8x64xf16>, memref<1x?x2x64xf8E4M3FN>, memref<1x?x2x64xf8E4M3FN>, memref<1xi32> into memref<1x8x64xf16>
  return
}

// -----

func.func @fp8_per_tensor_scale_size(%q: memref<1x8x64xf16>, %k: memref<1x?x2x64xf8E4M3FN>, %v: memref<1x?x2x64xf8E4M3FN>, %l: memref<1xi32>, %ks: memref<2xf32>, %o: memref<1x8x64xf16>) {
  // expected-error @below {{'k_scale' must be [1] (per tensor) or [1, ?, 2] (per token and KV head, the cache's shape without the head dim) of f32, got 'memref<2xf32>'}}
  fd.attention %q, %k, %v, %l k_scale %ks : memref<2xf32> v_scale %ks : memref<2xf32> into %o : memref<1x8x64xf16>, memref<1x?x2x64xf8E4M3FN>, memref<1x?x2x64xf8E4M3FN>, memref<1xi32> into memref<1x8x64xf16>
  return
}

// -----

func.func @fp8_mixed_granularity(%q: memref<1x8x64xf16>, %k: memref<1x?x2x64xf8E4M3FN>, %v: memref<1x?x2x64xf8E4M3FN>, %l: memref<1xi32>, %ks: memref<1x?x2xf32>, %vs: memref<1xf32>, %o: memref<1x8x64xf16>) {
  // expected-error @below {{'k_scale' and 'v_scale' must be of one granularity (both per tensor or both per token and KV head), got 'memref<1x?x2xf32>' and 'memref<1xf32>'}}
  fd.attention %q, %k, %v, %l k_scale %ks : memref<1x?x2xf32> v_scale %vs : memref<1xf32> into %o : memref<1x8x64xf16>, memref<1x?x2x64xf8E4M3FN>, memref<1x?x2x64xf8E4M3FN>, memref<1xi32> into memref<1x8x64xf16>
  return
}

// -----

func.func @fp8_query(%q: memref<1x8x64xf8E4M3FN>, %k: memref<1x?x2x64xf8E4M3FN>, %v: memref<1x?x2x64xf8E4M3FN>, %l: memref<1xi32>, %s: memref<1xf32>, %o: memref<1x8x64xf16>) {
  // expected-error @below {{operand #0 must be 3D/4D memref of 16-bit float or bfloat16 type or 32-bit float values}}
  fd.attention %q, %k, %v, %l k_scale %s : memref<1xf32> v_scale %s : memref<1xf32> into %o : memref<1x8x64xf8E4M3FN>, memref<1x?x2x64xf8E4M3FN>, memref<1x?x2x64xf8E4M3FN>, memref<1xi32> into memref<1x8x64xf16>
  return
}
// -----

// A schedule the kernel cannot run: each field's rule, named.
func.func @schedule_threads(%q: memref<1x16x64xf16>, %k: memref<1x?x1x64xf16>, %v: memref<1x?x1x64xf16>, %l: memref<1xi32>, %po: memref<1x16x4x64xf32>, %pl: memref<1x16x4xf32>) {
  // expected-error @below {{schedule: threads = 256 is not supported: the kernels are built for 128 (4 warps)}}
  fd.partial_attention %q, %k, %v, %l into %po, %pl {schedule = #fd.schedule<form = tensor_cores, rows_per_tile = 16, row_tiles = 1, threads = 256, min_blocks_per_sm = 4, held_query_steps = 4, stages = 2>} : memref<1x16x64xf16>, memref<1x?x1x64xf16>, memref<1x?x1x64xf16>, memref<1xi32> into memref<1x16x4x64xf32>, memref<1x16x4xf32>
  return
}

// -----

func.func @schedule_cluster_ctas(%q: memref<1x8x128xf32>, %k: memref<1x?x1x128xf32>, %v: memref<1x?x1x128xf32>, %l: memref<1xi32>, %po: memref<1x8x4x128xf32>, %pl: memref<1x8x4xf32>) {
  // expected-error @below {{schedule: cluster_ctas = 9 is out of range: 1 to 8 blocks a chunk (a portable thread block cluster)}}
  fd.partial_attention %q, %k, %v, %l into %po, %pl {schedule = #fd.schedule<form = cuda_cores, rows_per_tile = 8, row_tiles = 1, threads = 128, cluster_ctas = 9>} : memref<1x8x128xf32>, memref<1x?x1x128xf32>, memref<1x?x1x128xf32>, memref<1xi32> into memref<1x8x4x128xf32>, memref<1x8x4xf32>
  return
}

// -----

func.func @schedule_form_f32(%q: memref<1x16x64xf32>, %k: memref<1x?x1x64xf32>, %v: memref<1x?x1x64xf32>, %l: memref<1xi32>, %po: memref<1x16x4x64xf32>, %pl: memref<1x16x4xf32>) {
  // expected-error @below {{schedule: form = tensor_cores needs f16 or bf16 queries (mma.sync's operands), got 32-bit queries}}
  fd.partial_attention %q, %k, %v, %l into %po, %pl {schedule = #fd.schedule<form = tensor_cores, rows_per_tile = 16, row_tiles = 1, threads = 128, stages = 2>} : memref<1x16x64xf32>, memref<1x?x1x64xf32>, memref<1x?x1x64xf32>, memref<1xi32> into memref<1x16x4x64xf32>, memref<1x16x4xf32>
  return
}

// -----

func.func @schedule_form_head_dim(%q: memref<1x16x96xf16>, %k: memref<1x?x1x96xf16>, %v: memref<1x?x1x96xf16>, %l: memref<1xi32>, %o: memref<1x16x96xf16>) {
  // expected-error @below {{schedule: form = tensor_cores needs a head dim of 64 or 128 with values of their own at it, or else (warps splitting the value dims) a head dim that is a multiple of 64 up to 576, got 96}}
  fd.attention %q, %k, %v, %l into %o {schedule = #fd.schedule<form = tensor_cores, rows_per_tile = 16, row_tiles = 1, threads = 128, stages = 2>} : memref<1x16x96xf16>, memref<1x?x1x96xf16>, memref<1x?x1x96xf16>, memref<1xi32> into memref<1x16x96xf16>
  return
}

// -----

func.func @schedule_tile_over_mma(%q: memref<1x32x64xf16>, %k: memref<1x?x1x64xf16>, %v: memref<1x?x1x64xf16>, %l: memref<1xi32>, %po: memref<1x32x4x64xf32>, %pl: memref<1x32x4xf32>) {
  // expected-error @below {{schedule: rows_per_tile = 32 is out of range: 1 to 16 (the 32 query rows of a KV head, at most an mma tile's 16)}}
  fd.partial_attention %q, %k, %v, %l into %po, %pl {schedule = #fd.schedule<form = tensor_cores, rows_per_tile = 32, row_tiles = 1, threads = 128, stages = 2>} : memref<1x32x64xf16>, memref<1x?x1x64xf16>, memref<1x?x1x64xf16>, memref<1xi32> into memref<1x32x4x64xf32>, memref<1x32x4xf32>
  return
}

// -----

func.func @schedule_rows_uncovered(%q: memref<1x4x16x64xf16>, %k: memref<1x?x2x64xf16>, %v: memref<1x?x2x64xf16>, %l: memref<1xi32>, %po: memref<1x4x16x4x64xf32>, %pl: memref<1x4x16x4xf32>) {
  // expected-error @below {{schedule: rows_per_tile = 8 x row_tiles = 3 do not cover the 32 query rows of a KV head (group size 8 x Lq 4)}}
  fd.partial_attention %q, %k, %v, %l into %po, %pl {schedule = #fd.schedule<form = tensor_cores, rows_per_tile = 8, row_tiles = 3, threads = 128, stages = 2>} : memref<1x4x16x64xf16>, memref<1x?x2x64xf16>, memref<1x?x2x64xf16>, memref<1xi32> into memref<1x4x16x4x64xf32>, memref<1x4x16x4xf32>
  return
}

// -----

func.func @schedule_empty_tile(%q: memref<1x16x64xf16>, %k: memref<1x?x1x64xf16>, %v: memref<1x?x1x64xf16>, %l: memref<1xi32>, %po: memref<1x16x4x64xf32>, %pl: memref<1x16x4xf32>) {
  // expected-error @below {{schedule: row_tiles = 3 leaves a tile without rows: 16 rows in tiles of 8 take 2}}
  fd.partial_attention %q, %k, %v, %l into %po, %pl {schedule = #fd.schedule<form = tensor_cores, rows_per_tile = 8, row_tiles = 3, threads = 128, stages = 2>} : memref<1x16x64xf16>, memref<1x?x1x64xf16>, memref<1x?x1x64xf16>, memref<1xi32> into memref<1x16x4x64xf32>, memref<1x16x4xf32>
  return
}

// -----

func.func @schedule_stages_on_cuda_cores(%q: memref<1x16x64xf32>, %k: memref<1x?x1x64xf32>, %v: memref<1x?x1x64xf32>, %l: memref<1xi32>, %po: memref<1x16x4x64xf32>, %pl: memref<1x16x4xf32>) {
  // expected-error @below {{schedule: stages = 2 applies to form = tensor_cores only: expected 0 for form = cuda_cores}}
  fd.partial_attention %q, %k, %v, %l into %po, %pl {schedule = #fd.schedule<form = cuda_cores, rows_per_tile = 4, row_tiles = 4, threads = 128, stages = 2>} : memref<1x16x64xf32>, memref<1x?x1x64xf32>, memref<1x?x1x64xf32>, memref<1xi32> into memref<1x16x4x64xf32>, memref<1x16x4xf32>
  return
}

// -----

func.func @schedule_one_stage(%q: memref<1x16x64xf16>, %k: memref<1x?x1x64xf16>, %v: memref<1x?x1x64xf16>, %l: memref<1xi32>, %po: memref<1x16x4x64xf32>, %pl: memref<1x16x4xf32>) {
  // expected-error @below {{schedule: stages = 1 is too few: the K/V pipeline copies the next step while the block computes this one, so it needs at least 2}}
  fd.partial_attention %q, %k, %v, %l into %po, %pl {schedule = #fd.schedule<form = tensor_cores, rows_per_tile = 16, row_tiles = 1, threads = 128, stages = 1>} : memref<1x16x64xf16>, memref<1x?x1x64xf16>, memref<1x?x1x64xf16>, memref<1xi32> into memref<1x16x4x64xf32>, memref<1x16x4xf32>
  return
}

// -----

func.func @schedule_held_steps(%q: memref<1x16x64xf16>, %k: memref<1x?x1x64xf16>, %v: memref<1x?x1x64xf16>, %l: memref<1xi32>, %po: memref<1x16x4x64xf32>, %pl: memref<1x16x4xf32>) {
  // expected-error @below {{schedule: held_query_steps = 5 is out of range: 0 to 4 (q's 16-wide k-steps at head dim 64)}}
  fd.partial_attention %q, %k, %v, %l into %po, %pl {schedule = #fd.schedule<form = tensor_cores, rows_per_tile = 16, row_tiles = 1, threads = 128, held_query_steps = 5, stages = 2>} : memref<1x16x64xf16>, memref<1x?x1x64xf16>, memref<1x?x1x64xf16>, memref<1xi32> into memref<1x16x4x64xf32>, memref<1x16x4xf32>
  return
}

// -----

func.func @schedule_blocks_per_sm(%q: memref<1x16x64xf16>, %k: memref<1x?x1x64xf16>, %v: memref<1x?x1x64xf16>, %l: memref<1xi32>, %po: memref<1x16x4x64xf32>, %pl: memref<1x16x4xf32>) {
  // expected-error @below {{schedule: min_blocks_per_sm = 16 is out of range: 0 (no launch bounds) to 12 blocks of 128 threads (what sm_86 holds per SM)}}
  fd.partial_attention %q, %k, %v, %l into %po, %pl {schedule = #fd.schedule<form = tensor_cores, rows_per_tile = 16, row_tiles = 1, threads = 128, min_blocks_per_sm = 16, stages = 2>} : memref<1x16x64xf16>, memref<1x?x1x64xf16>, memref<1x?x1x64xf16>, memref<1xi32> into memref<1x16x4x64xf32>, memref<1x16x4xf32>
  return
}

// -----

// D = 128 on tensor cores: 64 accumulator registers a lane, 32 more for all
// of q's fragments, 12 a step; 8 blocks per SM leave 64.
func.func @schedule_registers(%q: memref<1x16x128xf16>, %k: memref<1x?x1x128xf16>, %v: memref<1x?x1x128xf16>, %l: memref<1xi32>, %po: memref<1x16x4x128xf32>, %pl: memref<1x16x4xf32>) {
  // expected-error @below {{schedule: min_blocks_per_sm = 8 leaves 64 registers a thread on sm_80, fewer than the 112 its token loop holds at least}}
  fd.partial_attention %q, %k, %v, %l into %po, %pl {schedule = #fd.schedule<form = tensor_cores, rows_per_tile = 16, row_tiles = 1, threads = 128, min_blocks_per_sm = 8, held_query_steps = 8, stages = 2>} : memref<1x16x128xf16>, memref<1x?x1x128xf16>, memref<1x?x1x128xf16>, memref<1xi32> into memref<1x16x4x128xf32>, memref<1x16x4xf32>
  return
}

// -----

// A CUDA-core tile of 16 rows at D = 128 (22 registers a row).
func.func @schedule_cuda_core_rows(%q: memref<1x16x128xf16>, %k: memref<1x?x1x128xf16>, %v: memref<1x?x1x128xf16>, %l: memref<1xi32>, %po: memref<1x16x4x128xf32>, %pl: memref<1x16x4xf32>) {
  // expected-error @below {{schedule: rows_per_tile = 16 leaves 255 registers a thread on sm_80, fewer than the 384 its token loop holds at least}}
  fd.partial_attention %q, %k, %v, %l into %po, %pl {schedule = #fd.schedule<form = cuda_cores, rows_per_tile = 16, row_tiles = 1, threads = 128>} : memref<1x16x128xf16>, memref<1x?x1x128xf16>, memref<1x?x1x128xf16>, memref<1xi32> into memref<1x16x4x128xf32>, memref<1x16x4xf32>
  return
}

// -----

// Three stages of K and V at D = 128 are 48 KiB: with q's fragments and the
// warps' states more than a block declares.
func.func @schedule_shared_memory(%q: memref<1x16x128xf16>, %k: memref<1x?x1x128xf16>, %v: memref<1x?x1x128xf16>, %l: memref<1xi32>, %po: memref<1x16x4x128xf32>, %pl: memref<1x16x4xf32>) {
  // expected-error @below {{schedule: stages = 3, rows_per_tile = 16: the kernel's workgroup memory is 53760 bytes, more than the 49152 a block declares statically}}
  fd.partial_attention %q, %k, %v, %l into %po, %pl {schedule = #fd.schedule<form = tensor_cores, rows_per_tile = 16, row_tiles = 1, threads = 128, min_blocks_per_sm = 3, held_query_steps = 8, stages = 3>} : memref<1x16x128xf16>, memref<1x?x1x128xf16>, memref<1x?x1x128xf16>, memref<1xi32> into memref<1x16x4x128xf32>, memref<1x16x4xf32>
  return
}

// -----

func.func @schedule_unknown_form(%q: memref<1x16x64xf16>, %k: memref<1x?x1x64xf16>, %v: memref<1x?x1x64xf16>, %l: memref<1xi32>, %po: memref<1x16x4x64xf32>, %pl: memref<1x16x4xf32>) {
  // expected-error @below {{unknown kernel form 'wgmma': expected cuda_cores or tensor_cores}}
  // expected-error @below {{failed to parse FD_ScheduleAttr parameter 'form'}}
  fd.partial_attention %q, %k, %v, %l into %po, %pl {schedule = #fd.schedule<form = wgmma, rows_per_tile = 16, row_tiles = 1, threads = 128>} : memref<1x16x64xf16>, memref<1x?x1x64xf16>, memref<1x?x1x64xf16>, memref<1xi32> into memref<1x16x4x64xf32>, memref<1x16x4xf32>
  return
}

// -----

func.func @value_head_dim_520(%q: memref<1x8x576xf16>, %k: memref<1x?x1x576xf16>, %v: memref<1x?x1x520xf16>, %l: memref<1xi32>, %o: memref<1x8x520xf16>) {
  // expected-error @below {{'output' head dim (D_v) [520] is not supported: expected a static multiple of 8 in [32, 512]}}
  fd.attention %q, %k, %v, %l into %o : memref<1x8x576xf16>, memref<1x?x1x576xf16>, memref<1x?x1x520xf16>, memref<1xi32> into memref<1x8x520xf16>
  return
}

// -----

func.func @value_cache_head_dim(%q: memref<1x8x576xf16>, %k: memref<1x?x1x576xf16>, %v: memref<1x?x1x576xf16>, %l: memref<1xi32>, %o: memref<1x8x512xf16>) {
  // expected-error @below {{'value_cache' shape [1, ?, 1, 576] must be the 'key_cache' shape with the value head dim (D_v, of 'output') last: [1, ?, 1, 512]}}
  fd.attention %q, %k, %v, %l into %o : memref<1x8x576xf16>, memref<1x?x1x576xf16>, memref<1x?x1x576xf16>, memref<1xi32> into memref<1x8x512xf16>
  return
}

// -----

func.func @latent_values_wider_than_keys(%q: memref<1x8x128xf16>, %kv: memref<1x?x1x128xf16>, %l: memref<1xi32>, %o: memref<1x8x256xf16>) {
  // expected-error @below {{without 'value_cache' the values are the first D_v columns of 'key_cache': D_v (256, of 'output') must be at most its head dim 128}}
  fd.attention %q, %kv, %l into %o : memref<1x8x128xf16>, memref<1x?x1x128xf16>, memref<1xi32> into memref<1x8x256xf16>
  return
}

// -----

func.func @latent_partial_output(%q: memref<1x16x576xbf16>, %kv: memref<1x?x1x576xbf16>, %l: memref<1xi32>, %po: memref<1x16x4x576xf32>, %pl: memref<1x16x4xf32>) {
  // expected-error @below {{'partial_output' head dim (D_v) [576] is not supported: expected a static multiple of 8 in [32, 512]}}
  fd.partial_attention %q, %kv, %l into %po, %pl : memref<1x16x576xbf16>, memref<1x?x1x576xbf16>, memref<1xi32> into memref<1x16x4x576xf32>, memref<1x16x4xf32>
  return
}

// -----

func.func @latent_v_scale(%q: memref<1x16x576xbf16>, %kv: memref<1x?x1x576xf8E4M3FN>, %l: memref<1xi32>, %s: memref<1xf32>, %o: memref<1x16x512xbf16>) {
  // expected-error @below {{'v_scale' must be absent without 'value_cache': the values are the first D_v columns of 'key_cache', scaled by 'k_scale'}}
  fd.attention %q, %kv, %l k_scale %s : memref<1xf32> v_scale %s : memref<1xf32> into %o : memref<1x16x576xbf16>, memref<1x?x1x576xf8E4M3FN>, memref<1xi32> into memref<1x16x512xbf16>
  return
}

// -----

func.func @latent_needs_k_scale(%q: memref<1x16x576xbf16>, %kv: memref<1x?x1x576xf8E4M3FN>, %l: memref<1xi32>, %o: memref<1x16x512xbf16>) {
  // expected-error @below {{an fp8 'key_cache' ('f8E4M3FN') needs 'k_scale'}}
  fd.attention %q, %kv, %l into %o : memref<1x16x576xbf16>, memref<1x?x1x576xf8E4M3FN>, memref<1xi32> into memref<1x16x512xbf16>
  return
}

// -----

func.func @kv_shard_without_rank(%q: memref<1x8x64xf16>, %k: memref<1x?x2x64xf16>, %v: memref<1x?x2x64xf16>, %l: memref<1xi32>, %o: memref<1x8x64xf16>) {
  // expected-error @below {{'kv_shard' and 'kv_shard_rank' go together: the attribute says how the cache is sharded, the operand which rank's share it holds; got the attribute alone}}
  fd.attention %q, %k, %v, %l into %o {kv_shard = #fd.kv_shard<world = 2, interleave = 1>} : memref<1x8x64xf16>, memref<1x?x2x64xf16>, memref<1x?x2x64xf16>, memref<1xi32> into memref<1x8x64xf16>
  return
}

// -----

func.func @kv_shard_rank_alone(%q: memref<1x8x64xf16>, %k: memref<1x?x2x64xf16>, %v: memref<1x?x2x64xf16>, %l: memref<1xi32>, %r: memref<1xi32>, %po: memref<1x8x2x64xf32>, %pl: memref<1x8x2xf32>) {
  // expected-error @below {{'kv_shard' and 'kv_shard_rank' go together: the attribute says how the cache is sharded, the operand which rank's share it holds; got the operand alone}}
  fd.partial_attention %q, %k, %v, %l kv_shard_rank %r : memref<1xi32> into %po, %pl : memref<1x8x64xf16>, memref<1x?x2x64xf16>, memref<1x?x2x64xf16>, memref<1xi32> into memref<1x8x2x64xf32>, memref<1x8x2xf32>
  return
}

// -----

func.func @kv_shard_rank_size(%q: memref<1x8x64xf16>, %k: memref<1x?x2x64xf16>, %v: memref<1x?x2x64xf16>, %l: memref<1xi32>, %r: memref<2xi32>, %o: memref<1x8x64xf16>) {
  // expected-error @below {{'kv_shard_rank' must be this rank, [1]}}
  fd.attention %q, %k, %v, %l kv_shard_rank %r : memref<2xi32> into %o {kv_shard = #fd.kv_shard<world = 2, interleave = 1>} : memref<1x8x64xf16>, memref<1x?x2x64xf16>, memref<1x?x2x64xf16>, memref<1xi32> into memref<1x8x64xf16>
  return
}

// -----

func.func @kv_shard_rank_type(%q: memref<1x8x64xf16>, %k: memref<1x?x2x64xf16>, %v: memref<1x?x2x64xf16>, %l: memref<1xi32>, %r: memref<1xi64>, %o: memref<1x8x64xf16>) {
  // expected-error @below {{operand #4 must be 1D memref of 32-bit signless integer values}}
  fd.attention %q, %k, %v, %l kv_shard_rank %r : memref<1xi64> into %o {kv_shard = #fd.kv_shard<world = 2, interleave = 1>} : memref<1x8x64xf16>, memref<1x?x2x64xf16>, memref<1x?x2x64xf16>, memref<1xi32> into memref<1x8x64xf16>
  return
}

// -----

func.func @kv_shard_world(%q: memref<1x8x64xf16>, %k: memref<1x?x2x64xf16>, %v: memref<1x?x2x64xf16>, %l: memref<1xi32>, %r: memref<1xi32>, %o: memref<1x8x64xf16>) {
  // expected-error @below {{#fd.kv_shard: kv_shard_world must be >= 1 (the ranks the cache is sharded over), got 0}}
  fd.attention %q, %k, %v, %l kv_shard_rank %r : memref<1xi32> into %o {kv_shard = #fd.kv_shard<world = 0, interleave = 1>} : memref<1x8x64xf16>, memref<1x?x2x64xf16>, memref<1x?x2x64xf16>, memref<1xi32> into memref<1x8x64xf16>
  return
}

// -----

func.func @kv_shard_interleave(%q: memref<1x8x64xf16>, %k: memref<1x?x2x64xf16>, %v: memref<1x?x2x64xf16>, %l: memref<1xi32>, %r: memref<1xi32>, %o: memref<1x8x64xf16>) {
  // expected-error @below {{#fd.kv_shard: kv_shard_interleave must be >= 1 (consecutive tokens on one rank), got -4}}
  fd.attention %q, %k, %v, %l kv_shard_rank %r : memref<1xi32> into %o {kv_shard = #fd.kv_shard<world = 2, interleave = -4>} : memref<1x8x64xf16>, memref<1x?x2x64xf16>, memref<1x?x2x64xf16>, memref<1xi32> into memref<1x8x64xf16>
  return
}

// -----

func.func @kv_shard_with_sinks(%q: memref<1x8x64xf16>, %k: memref<1x?x2x64xf16>, %v: memref<1x?x2x64xf16>, %l: memref<1xi32>, %r: memref<1xi32>, %s: memref<8xf32>, %o: memref<1x8x64xf16>) {
  // expected-error @below {{'sinks' with 'kv_shard': each rank would count the sinks once more; merge the ranks' states, then join the sinks there as one more state (fd.merge_states)}}
  fd.attention %q, %k, %v, %l kv_shard_rank %r : memref<1xi32> sinks %s : memref<8xf32> into %o {kv_shard = #fd.kv_shard<world = 2, interleave = 1>} : memref<1x8x64xf16>, memref<1x?x2x64xf16>, memref<1x?x2x64xf16>, memref<1xi32> into memref<1x8x64xf16>
  return
}

// -----

func.func @holes_without_block_table(%q: memref<1x8x64xf16>, %k: memref<1x?x2x64xf16>, %v: memref<1x?x2x64xf16>, %l: memref<1xi32>, %o: memref<1x8x64xf16>) {
  // expected-error @below {{'block_table_holes' says which block-table entries are holes: it needs a 'block_table'}}
  fd.attention %q, %k, %v, %l into %o {block_table_holes} : memref<1x8x64xf16>, memref<1x?x2x64xf16>, memref<1x?x2x64xf16>, memref<1xi32> into memref<1x8x64xf16>
  return
}

// -----

// A shared prefix (suffix_lens) is one sequence: seq_lens is its length, [1].
func.func @suffix_lens_seq_lens_size(%q: memref<2x8x64xf16>, %k: memref<1x?x2x64xf16>, %v: memref<1x?x2x64xf16>, %l: memref<2xi32>, %s: memref<2xi32>, %o: memref<2x8x64xf16>) {
  // expected-error @below {{'seq_lens' with 'suffix_lens' is the shared prefix's length: size [1], got [2]}}
  fd.attention %q, %k, %v, %l suffix_lens %s : memref<2xi32> into %o : memref<2x8x64xf16>, memref<1x?x2x64xf16>, memref<1x?x2x64xf16>, memref<2xi32> into memref<2x8x64xf16>
  return
}

// -----

// ... and its dense cache holds that one sequence: batch 1, not the query's.
func.func @suffix_lens_cache_batch(%q: memref<2x8x64xf16>, %k: memref<2x?x2x64xf16>, %v: memref<2x?x2x64xf16>, %l: memref<1xi32>, %s: memref<2xi32>, %o: memref<2x8x64xf16>) {
  // expected-error @below {{'key_cache' with 'suffix_lens' holds the shared prefix, one sequence: batch size [1], got [2]}}
  fd.attention %q, %k, %v, %l suffix_lens %s : memref<2xi32> into %o : memref<2x8x64xf16>, memref<2x?x2x64xf16>, memref<2x?x2x64xf16>, memref<1xi32> into memref<2x8x64xf16>
  return
}

// -----

// ... and its block table has one row.
func.func @suffix_lens_block_table_rows(%q: memref<2x8x64xf16>, %k: memref<?x16x2x64xf16>, %v: memref<?x16x2x64xf16>, %l: memref<1xi32>, %t: memref<2x?xi32>, %s: memref<2xi32>, %po: memref<2x8x2x64xf32>, %pl: memref<2x8x2xf32>) {
  // expected-error @below {{'block_table' with 'suffix_lens' holds the shared prefix's pages: one row, got [2] rows}}
  fd.partial_attention %q, %k, %v, %l block_table %t : memref<2x?xi32> suffix_lens %s : memref<2xi32> into %po, %pl : memref<2x8x64xf16>, memref<?x16x2x64xf16>, memref<?x16x2x64xf16>, memref<1xi32> into memref<2x8x2x64xf32>, memref<2x8x2xf32>
  return
}

// -----

// One suffix length per query sequence.
func.func @suffix_lens_size(%q: memref<2x8x64xf16>, %k: memref<1x?x2x64xf16>, %v: memref<1x?x2x64xf16>, %l: memref<1xi32>, %s: memref<3xi32>, %o: memref<2x8x64xf16>) {
  // expected-error @below {{'suffix_lens' must have one suffix length per sequence: size [3] but the batch size is [2]}}
  fd.attention %q, %k, %v, %l suffix_lens %s : memref<3xi32> into %o : memref<2x8x64xf16>, memref<1x?x2x64xf16>, memref<1x?x2x64xf16>, memref<1xi32> into memref<2x8x64xf16>
  return
}

// -----

func.func @suffix_lens_with_query_lens(%q: memref<2x4x8x64xf16>, %k: memref<1x?x2x64xf16>, %v: memref<1x?x2x64xf16>, %l: memref<1xi32>, %ql: memref<2xi32>, %s: memref<2xi32>, %o: memref<2x4x8x64xf16>) {
  // expected-error @below {{'suffix_lens' (a shared prefix) does not go with 'query_lens': every sequence continuing the prefix has Lq query tokens and the prefix is one dense or paged sequence}}
  fd.attention %q, %k, %v, %l query_lens %ql : memref<2xi32> suffix_lens %s : memref<2xi32> into %o : memref<2x4x8x64xf16>, memref<1x?x2x64xf16>, memref<1x?x2x64xf16>, memref<1xi32> into memref<2x4x8x64xf16>
  return
}

// -----

func.func @suffix_lens_with_kv_shard(%q: memref<2x8x64xf16>, %k: memref<1x?x2x64xf16>, %v: memref<1x?x2x64xf16>, %l: memref<1xi32>, %r: memref<1xi32>, %s: memref<2xi32>, %po: memref<2x8x2x64xf32>, %pl: memref<2x8x2xf32>) {
  // expected-error @below {{'suffix_lens' (a shared prefix) does not go with 'kv_shard': every sequence continuing the prefix has Lq query tokens and the prefix is one dense or paged sequence}}
  fd.partial_attention %q, %k, %v, %l kv_shard_rank %r : memref<1xi32> suffix_lens %s : memref<2xi32> into %po, %pl {kv_shard = #fd.kv_shard<world = 2, interleave = 1>} : memref<2x8x64xf16>, memref<1x?x2x64xf16>, memref<1x?x2x64xf16>, memref<1xi32> into memref<2x8x2x64xf32>, memref<2x8x2xf32>
  return
}

// -----

func.func @suffix_lens_with_holes(%q: memref<2x8x64xf16>, %k: memref<?x1x2x64xf16>, %v: memref<?x1x2x64xf16>, %l: memref<1xi32>, %t: memref<1x16xi32>, %s: memref<2xi32>, %o: memref<2x8x64xf16>) {
  // expected-error @below {{'suffix_lens' (a shared prefix) does not go with 'block_table_holes': every sequence continuing the prefix has Lq query tokens and the prefix is one dense or paged sequence}}
  fd.attention %q, %k, %v, %l block_table %t : memref<1x16xi32> suffix_lens %s : memref<2xi32> into %o {block_table_holes} : memref<2x8x64xf16>, memref<?x1x2x64xf16>, memref<?x1x2x64xf16>, memref<1xi32> into memref<2x8x64xf16>
  return
}

// -----

// The warpgroup tile (form = warpgroup_tensor_cores): MLA's latent cache
// only, two warpgroups of a 64-row tile.
func.func @schedule_warpgroup_values_apart(%q: memref<1x64x64xbf16>, %k: memref<1x?x1x64xbf16>, %v: memref<1x?x1x64xbf16>, %l: memref<1xi32>, %po: memref<1x64x4x64xf32>, %pl: memref<1x64x4xf32>) {
  // expected-error @below {{schedule: form = warpgroup_tensor_cores needs values that are the key cache's first D_v columns (shared_kv, MLA's latent cache)}}
  fd.partial_attention %q, %k, %v, %l into %po, %pl {schedule = #fd.schedule<form = warpgroup_tensor_cores, rows_per_tile = 64, row_tiles = 1, threads = 256, min_blocks_per_sm = 1, stages = 2>} : memref<1x64x64xbf16>, memref<1x?x1x64xbf16>, memref<1x?x1x64xbf16>, memref<1xi32> into memref<1x64x4x64xf32>, memref<1x64x4xf32>
  return
}

// -----

func.func @schedule_warpgroup_threads(%q: memref<1x128x576xbf16>, %kv: memref<1x?x1x576xbf16>, %l: memref<1xi32>, %po: memref<1x128x2x512xf32>, %pl: memref<1x128x2xf32>) {
  // expected-error @below {{schedule: threads = 128: form = warpgroup_tensor_cores takes 256 (two warpgroups)}}
  fd.partial_attention %q, %kv, %l into %po, %pl {schedule = #fd.schedule<form = warpgroup_tensor_cores, rows_per_tile = 64, row_tiles = 2, threads = 128, min_blocks_per_sm = 1, stages = 2>} : memref<1x128x576xbf16>, memref<1x?x1x576xbf16>, memref<1xi32> into memref<1x128x2x512xf32>, memref<1x128x2xf32>
  return
}

// -----

func.func @schedule_warpgroup_rows(%q: memref<1x128x576xbf16>, %kv: memref<1x?x1x576xbf16>, %l: memref<1xi32>, %po: memref<1x128x2x512xf32>, %pl: memref<1x128x2xf32>) {
  // expected-error @below {{schedule: rows_per_tile = 16: form = warpgroup_tensor_cores takes 64 (wgmma's M)}}
  fd.partial_attention %q, %kv, %l into %po, %pl {schedule = #fd.schedule<form = warpgroup_tensor_cores, rows_per_tile = 16, row_tiles = 8, threads = 256, min_blocks_per_sm = 1, stages = 2>} : memref<1x128x576xbf16>, memref<1x?x1x576xbf16>, memref<1xi32> into memref<1x128x2x512xf32>, memref<1x128x2xf32>
  return
}

// -----

func.func @schedule_warpgroup_stages(%q: memref<1x128x576xbf16>, %kv: memref<1x?x1x576xbf16>, %l: memref<1xi32>, %po: memref<1x128x2x512xf32>, %pl: memref<1x128x2xf32>) {
  // expected-error @below {{schedule: stages = 5 is out of range: 2 to 4}}
  fd.partial_attention %q, %kv, %l into %po, %pl {schedule = #fd.schedule<form = warpgroup_tensor_cores, rows_per_tile = 64, row_tiles = 2, threads = 256, min_blocks_per_sm = 1, stages = 5>} : memref<1x128x576xbf16>, memref<1x?x1x576xbf16>, memref<1xi32> into memref<1x128x2x512xf32>, memref<1x128x2xf32>
  return
}

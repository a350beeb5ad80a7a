PASS vhe mode-line kvm [1]: VHE mode initialized successfully
PASS vhe g_ring_1_fx
PASS vhe g_ring_2_fx
PASS vhe g_bitmap_1_fx
PASS vhe g_bitmap_2_fx
PASS vhe serial-log clean (14s)

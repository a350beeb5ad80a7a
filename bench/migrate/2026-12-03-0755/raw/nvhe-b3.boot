PASS nvhe mode-line kvm [1]: Hyp nVHE mode initialized successfully
PASS nvhe g_bitmap_2_fx
PASS nvhe g_bitmap_1_fx
PASS nvhe g_ring_2_fx
PASS nvhe g_ring_1_fx
PASS nvhe serial-log clean (14s)

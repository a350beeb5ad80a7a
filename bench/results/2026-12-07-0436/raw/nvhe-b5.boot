PASS nvhe mode-line kvm [1]: Hyp nVHE mode initialized successfully
PASS nvhe b_2M_w10_2_mp_f0_wp1_c1
PASS nvhe b_2M_w100_2_mp_f0_wp1_c1
PASS nvhe b_0_w10_1_mp_f0_wp1_c1
PASS nvhe b_2M_w100_1_mp_f0_wp1_c1
PASS nvhe b_2M_w10_1_mp_f0_wp1_c1
PASS nvhe serial-log clean (20s)

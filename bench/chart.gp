# Renders bench_vs_redis's throughput as clustered bars (scripts/bench.sh passes data, out, when).
set terminal pngcairo size 1000,500 font ",10"
set output out
set title "Token-bucket acquires per second: Redis + Lua against ingrid (" . when . ")"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set ylabel "ops/s"
set xlabel "keys / requests in flight"
set key below
set grid ytics
set xtics rotate by -30
plot data using 2:xtic(1) title "Redis + Lua (standalone)", \
     '' using 3 title "ingrid, 1 server", \
     '' using 4 title "Redis Cluster 3+3 + Lua + WAIT 1", \
     '' using 5 title "ingrid, 3 servers, 1 sync backup"

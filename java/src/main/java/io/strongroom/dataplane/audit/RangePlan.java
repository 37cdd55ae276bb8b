package io.strongroom.dataplane.audit;

import java.util.ArrayList;
import java.util.List;

/**
 * Splitting ranges for parallel reads - {@code strongroom.audit.ranges.plan_ranges}: no piece larger than
 * {@code maxRecords} offsets, and at least {@code minPieces} pieces when there is enough data.
 */
final class RangePlan {
    private RangePlan() {
    }

    static List<RangePartition> plan(List<RangePartition> ranges, long maxRecords, int minPieces) {
        List<RangePartition> nonempty = new ArrayList<>();
        long total = 0;
        for (RangePartition r : ranges) {
            if (r.size() > 0) {
                nonempty.add(r);
                total += r.size();
            }
        }
        List<RangePartition> pieces = new ArrayList<>();
        if (total == 0) {
            return pieces;
        }
        long perPiece = -Math.floorDiv(-total, Math.max(1, minPieces));
        long target = Math.max(1, Math.min(maxRecords, perPiece));
        for (RangePartition r : nonempty) {
            for (long s = r.start(); s < r.end(); s += target) {
                pieces.add(new RangePartition(r.topic(), r.partition(), s, Math.min(r.end(), s + target)));
            }
        }
        return pieces;
    }
}

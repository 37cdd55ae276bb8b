package io.strongroom.dataplane.json;

import com.fasterxml.jackson.core.io.schubfach.DoubleToDecimal;
import java.math.BigDecimal;
import java.math.MathContext;
import java.math.RoundingMode;

/**
 * Python's {@code repr(float)}: the shortest decimal that reads back as the same double (Jackson's
 * Schubfach, the algorithm of JDK 19's {@code Double.toString}, since JDK 17's is not always shortest),
 * written in Python's layout: positional when the decimal exponent is in [-4, 16), scientific otherwise
 * ({@code 1e+16}, {@code 1.5e-05}), always with a {@code .0} when positional and integral.
 */
public final class PyFloat {
    private PyFloat() {
    }

    /** The text of a finite double; the caller refuses infinities and NaN. */
    public static String repr(double value) {
        if (value == 0.0) {
            return 1 / value < 0 ? "-0.0" : "0.0";
        }
        BigDecimal shortest = shortest(Math.abs(value));
        String digits = shortest.unscaledValue().toString();
        int pointPosition = digits.length() - shortest.scale(); // value = 0.digits × 10^pointPosition
        String body = pointPosition > -4 && pointPosition <= 16
                ? positional(digits, pointPosition) : scientific(digits, pointPosition - 1);
        return value < 0 ? "-" + body : body;
    }

    /**
     * A JSON double's text as a data subject: {@code java_double_text} in {@code clients/records.py}, the layout of
     * Java's {@code Double.toString} (plain in [1e-3, 1e7), else {@code d.dddE±n}) with the shortest round-trip
     * digits of {@link #repr}. Not {@code Double.toString} itself: JDK 17's gives more digits than that for some
     * doubles (7.693891857E18 as 7.6938918569999995E18) and JDK 19's others again, so the subject, and the key a
     * record is sealed with, would depend on the JVM.
     */
    public static String javaDoubleText(double value) {
        if (Double.isNaN(value) || Double.isInfinite(value)) {
            return Double.toString(value);
        }
        if (value == 0.0) {
            return 1 / value < 0 ? "-0.0" : "0.0";
        }
        double magnitude = Math.abs(value);
        BigDecimal shortest = shortest(magnitude);
        String digits = shortest.unscaledValue().toString();
        int exponent = digits.length() - shortest.scale() - 1; // of the first digit
        String body;
        if (magnitude >= 1e-3 && magnitude < 1e7) {
            body = positional(digits, exponent + 1);
        } else {
            body = digits.charAt(0) + "." + (digits.length() > 1 ? digits.substring(1) : "0") + "E" + exponent;
        }
        return value < 0 ? "-" + body : body;
    }

    /**
     * The shortest decimal that reads back as {@code magnitude}, the closest one when several are as short.
     * The JDK rule behind Schubfach's output asks for two digits where one would do (4.9e-324, not 5e-324);
     * Python takes the one digit, so a one-digit neighbour that reads back the same is preferred.
     */
    private static BigDecimal shortest(double magnitude) {
        BigDecimal twoOrMore = new BigDecimal(DoubleToDecimal.toString(magnitude)).stripTrailingZeros();
        if (twoOrMore.precision() != 2) {
            return twoOrMore;
        }
        BigDecimal exact = new BigDecimal(magnitude);
        BigDecimal best = twoOrMore;
        boolean shorter = false;
        for (RoundingMode mode : new RoundingMode[] {RoundingMode.DOWN, RoundingMode.UP}) {
            BigDecimal candidate = twoOrMore.round(new MathContext(1, mode));
            boolean closer = !shorter || distance(candidate, exact).compareTo(distance(best, exact)) < 0;
            if (candidate.doubleValue() == magnitude && closer) {
                best = candidate;
                shorter = true;
            }
        }
        return best.stripTrailingZeros();
    }

    private static BigDecimal distance(BigDecimal a, BigDecimal b) {
        return a.subtract(b).abs();
    }

    private static String positional(String digits, int pointPosition) {
        if (pointPosition <= 0) {
            return "0." + "0".repeat(-pointPosition) + digits;
        }
        if (pointPosition >= digits.length()) {
            return digits + "0".repeat(pointPosition - digits.length()) + ".0";
        }
        return digits.substring(0, pointPosition) + "." + digits.substring(pointPosition);
    }

    private static String scientific(String digits, int exponent) {
        String mantissa = digits.length() == 1 ? digits : digits.charAt(0) + "." + digits.substring(1);
        String sign = exponent < 0 ? "-" : "+";
        int magnitude = Math.abs(exponent);
        return mantissa + "e" + sign + (magnitude < 10 ? "0" : "") + magnitude;
    }
}

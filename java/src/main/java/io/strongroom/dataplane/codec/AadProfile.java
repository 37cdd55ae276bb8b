package io.strongroom.dataplane.codec;

/** Which context the AAD binds: TOPIC (topic, subject, field path) or PORTABLE (subject, field path). */
public enum AadProfile {
    TOPIC((byte) 0x01),
    PORTABLE((byte) 0x02);

    private final byte id;

    AadProfile(byte id) {
        this.id = id;
    }

    public byte id() {
        return id;
    }

    /** The profile with wire id {@code id}, or null when the registry has none. */
    public static AadProfile fromId(byte id) {
        for (AadProfile profile : values()) {
            if (profile.id == id) {
                return profile;
            }
        }
        return null;
    }
}

package io.sfs.flink;

import org.apache.flink.configuration.IllegalConfigurationException;
import org.apache.flink.configuration.ReadableConfig;
import org.apache.flink.runtime.state.StateBackendFactory;

/** {@code state.backend.type: io.sfs.flink.SfsStateBackendFactory} selects sfs. */
public class SfsStateBackendFactory implements StateBackendFactory<SfsStateBackend> {
    @Override
    public SfsStateBackend createFromConfig(ReadableConfig config, ClassLoader classLoader)
            throws IllegalConfigurationException {
        return new SfsStateBackend().configure(config, classLoader);
    }
}
